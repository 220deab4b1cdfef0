// Mixed precision for a worker's compute (spec.workers.precision): the parameters stay float32
// (master weights, the optimizer is unchanged); matmuls run in bf16 or fp16 under autocast.
//
//   Precision      parse_precision("fp32" | "bf16" | "fp16")
//   ComputeScope   RAII: thread-local autocast on for the device type while it lives; put it
//                  around a stage's forward only (the backward replays the recorded dtypes)
//   LossScaler     dynamic loss scaling for fp16 (scale, growth/backoff, skip on inf/nan)
//
// bf16 works on CUDA and on the CPU (CPU autocast). fp16 autocast is CUDA only: on the CPU a
// Float16 scope computes in float32 (effective_precision says so) rather than failing.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace swarm::model {

class StageOptimizer;

enum class Precision { Float32, BFloat16, Float16 };

// "fp32" | "float32" -> Float32, "bf16" | "bfloat16" -> BFloat16, "fp16" | "float16" -> Float16;
// anything else throws std::invalid_argument naming the accepted values.
Precision parse_precision(const std::string& text);
// spec.workers.precision: "auto" -> BFloat16 on a CUDA device, Float32 elsewhere (CPU numerics
// stay exactly those of float32); otherwise parse_precision(setting).
Precision pick_precision(const std::string& setting, c10::Device device);
const char* precision_name(Precision precision);  // "fp32" | "bf16" | "fp16"
// kFloat, kBFloat16, kHalf
c10::ScalarType precision_dtype(Precision precision);

// What a ComputeScope for (device, precision) actually computes in: Float16 on a non-CUDA device
// falls back to Float32; everything else is itself.
Precision effective_precision(c10::Device device, Precision precision);

// True when this library was compiled against a libtorch with CUDA (SWARM_MODEL_CUDA); whether a
// GPU is usable is torch::cuda::is_available().
bool built_with_cuda();

// This thread's autocast state for a device type (CUDA or CPU), whatever the libtorch version.
bool autocast_enabled(c10::DeviceType type);
c10::ScalarType autocast_dtype(c10::DeviceType type);

// Thread-local autocast for `device`'s type with the precision's dtype while alive; restores the
// previous autocast state (enabled flag and dtype) when destroyed, and clears the autocast weight
// cast cache when the outermost scope ends (so an optimizer step is never hidden by a stale bf16
// copy of a weight). Float32 (or Float16 on the CPU) is a no-op scope. Not copyable or movable;
// create and destroy it on the same thread.
class ComputeScope {
 public:
  ComputeScope(c10::Device device, Precision precision);
  ~ComputeScope();
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;

  bool active() const { return active_; }  // autocast switched on by this scope
  Precision precision() const { return precision_; }  // the effective precision
  c10::ScalarType compute_dtype() const { return precision_dtype(precision_); }

 private:
  c10::DeviceType type_;
  Precision precision_;
  bool active_ = false;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::ScalarType::Float;
};

struct LossScalerConfig {
  double init_scale = 65536.0;      // 2^16
  double growth_factor = 2.0;       // after growth_interval finite steps in a row
  double backoff_factor = 0.5;      // after a step with an inf/nan gradient
  int64_t growth_interval = 2000;
  double min_scale = 1.0;
  double max_scale = 16777216.0;    // 2^24
};

// Throws std::invalid_argument for a non-positive scale, growth <= 1, backoff outside (0,1),
// growth_interval < 1 or min_scale > max_scale.
void validate(const LossScalerConfig& config);

// Dynamic loss scaling for fp16, one per stage worker. In a pipeline every stage scales its own
// backward: the last stage backpropagates scale_loss(loss); a middle stage backpropagates
// scale_grad(grad_output) and sends unscale_grad(input.grad()) upstream, so what travels between
// stages is unscaled. Before averaging, unscale_ the local gradients (peers may hold different
// scales); after averaging, step() (or the StageOptimizer plus update()) decides on the summed
// gradient, so all peers skip or apply together. Scales are powers of two by default, so scaling
// and unscaling are exact.
class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = {});

  double scale() const { return scale_; }
  at::Tensor scale_loss(const at::Tensor& loss) const { return loss.mul(scale_); }
  at::Tensor scale_grad(const at::Tensor& grad) const { return grad.mul(scale_); }
  at::Tensor unscale_grad(const at::Tensor& grad) const { return grad.mul(1.0 / scale_); }

  // Divides every defined gradient in place by scale() (no host synchronization).
  void unscale_(const std::vector<at::Tensor>& grads) const;
  void unscale_(torch::nn::Module& model) const;  // the gradients of model.parameters()
  // True when every defined tensor is finite (one host synchronization).
  static bool all_finite(const std::vector<at::Tensor>& tensors);

  // found_inf: halve (backoff) and reset the growth counter; else count a good step and grow
  // after growth_interval of them. The scale stays within [min_scale, max_scale].
  void update(bool found_inf);

  // unscale_(model), optimizer.step() — which skips the update on a non-finite gradient norm
  // but still counts the step — then update(). Returns true when the update was applied.
  bool step(torch::nn::Module& model, StageOptimizer& optimizer);

  int64_t good_steps() const { return good_steps_; }  // finite steps since the last change
  int64_t skipped_steps() const { return skipped_; }
  const LossScalerConfig& config() const { return config_; }
  void set_scale(double scale);  // restored state, tests

 private:
  LossScalerConfig config_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace swarm::model
