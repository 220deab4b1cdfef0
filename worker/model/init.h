// Deterministic parameter initialization keyed by global names, shared by the architectures:
// each tensor draws from its own CPU generator seeded by derive_seed(seed, global name), so a
// layer gets bit-identical weights in a StageModel and in the unstaged TransformerLM, on any
// process and any device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace swarm::model {

// Mixes a run seed with a parameter name (FNV-1a of the name, then splitmix64).
uint64_t derive_seed(uint64_t seed, const std::string& name);

// Fills p (any device/dtype) with N(0, std) draws from a CPU float generator keyed by (seed, name):
// the values do not depend on where the parameter lives.
void init_normal(at::Tensor& p, uint64_t seed, const std::string& name, double std);
void init_const(at::Tensor& p, double value);

// GPT-2's and Hugging Face's initializer_range: the standard deviation of every weight matrix.
inline constexpr double kInitStd = 0.02;

}  // namespace swarm::model
