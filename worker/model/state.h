// State transfer and gradient helpers.
//
// save_state/load_state: a joining peer downloads the parameters AND the optimizer state of a
// live peer of its stage. The blob is self-describing and checked:
//   "SWMSTATE" u32 version | ModelConfig (state.cc: put_config) | i64 stage | u8 optimizer kind |
//   i64 step_count | i64 moment_steps | u32 n | n x { name, param, exp_avg, exp_avg_sq } |
//   u64 checksum of everything before it
// with each tensor as u8 dtype, u8 ndim, i64 dims[ndim], u64 nbytes, raw bytes (host order,
// little-endian on every supported machine). Loading validates everything before touching the
// model, so a rejected blob leaves model and optimizer unchanged. Version 2 is written; version 1
// (gpt2 only, the same layers on every stage) is still read.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace swarm::model {

class StageModel;
class StageOptimizer;

// Serializes parameters, moments, step counters and an identifying header (config + stage +
// optimizer kind). Tensors may live on any device.
std::string save_state(StageModel& model, StageOptimizer& optimizer);

// Restores what save_state wrote. Throws std::runtime_error with a clear message when the blob
// is truncated, corrupt (checksum), of another version, or for another config / stage / optimizer
// kind / parameter set. After a successful load, the next step() given the same gradients yields
// exactly the donor's next parameters.
void load_state(const std::string& bytes, StageModel& model, StageOptimizer& optimizer);

// The checksum that ends a state blob, of the n bytes before it (for tools that build a blob by
// hand, such as the fuzz target of load_state).
uint64_t state_checksum(const void* data, size_t n);

// The model's gradients in parameters() order (a zero tensor where a gradient is undefined).
// The returned tensors alias the live gradients; flatten() them before modifying.
std::vector<at::Tensor> grads(StageModel& model);

// Copies `grads` (parameters() order, matching shapes; any device/dtype) into the model's
// gradients. Throws std::invalid_argument on a count or shape mismatch.
void set_grads(StageModel& model, const std::vector<at::Tensor>& grads);

// Concatenates the tensors into one 1-D tensor (device/dtype of the first; empty float tensor
// for an empty list).
at::Tensor flatten(const std::vector<at::Tensor>& tensors);

// Copies consecutive slices of the 1-D `flat` into `tensors` in place (their storage is written).
// Throws std::invalid_argument if the element counts do not add up.
void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& tensors);

// 64-bit hash of the parameter names, shapes, dtypes and bytes: equal on two peers iff (with
// overwhelming probability) their parameters are bit-identical.
uint64_t param_fingerprint(StageModel& model);

}  // namespace swarm::model
