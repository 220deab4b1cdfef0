// Device choice for a worker (spec.workers.device).
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace swarm::model {

// "auto"   -> CUDA device 0 when torch::cuda::is_available(), else CPU
// "cpu"    -> CPU
// "cuda" / "cuda:N" -> that CUDA device; throws std::runtime_error when this libtorch has no
//                      usable CUDA or N is out of range
// anything else throws std::invalid_argument. (c10::Device is torch::Device.)
c10::Device pick_device(const std::string& setting);

// "cpu", "cuda:0", ...
std::string device_string(const c10::Device& device);

}  // namespace swarm::model
