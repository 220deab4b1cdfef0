#include "worker/model/device.h"

#include <torch/cuda.h>

#include <stdexcept>

namespace swarm::model {

c10::Device pick_device(const std::string& setting) {
  if (setting == "cpu") return c10::Device(c10::kCPU);
  if (setting == "auto") {
    return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  if (setting == "cuda" || setting.rfind("cuda:", 0) == 0) {
    if (!torch::cuda::is_available()) {
      throw std::runtime_error("device '" + setting +
                               "' requested but CUDA is not available (this libtorch was built "
                               "without CUDA or no GPU is visible); use 'cpu' or 'auto'");
    }
    int index = 0;
    if (setting.size() > 5) {
      const std::string digits = setting.substr(5);
      if (digits.empty() || digits.size() > 3 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        throw std::invalid_argument("bad device '" + setting + "' (expected cuda:N)");
      }
      index = std::stoi(digits);
    }
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (index >= count) {
      throw std::runtime_error("device '" + setting + "' requested but only " +
                               std::to_string(count) + " CUDA device(s) are visible");
    }
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw std::invalid_argument("unknown device setting '" + setting +
                              "' (expected auto, cpu, cuda or cuda:N)");
}

std::string device_string(const c10::Device& device) { return device.str(); }

}  // namespace swarm::model
