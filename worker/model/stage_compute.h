// StageCompute: one worker's device path for its stage (spec.workers.device, spec.workers.precision).
//
//   to_device   a request's host input (a received wire tensor) -> the device; on CUDA through a
//               pooled pinned buffer and a copy stream (HostStaging::to_device_async), ordered
//               before the compute on the current stream; on the CPU the tensor itself, no copy
//   forward     StageModel::forward under a ComputeScope (autocast bf16/fp16): the scope covers the
//               forward only, the backward replays the dtypes autograd recorded
//   backward    the stage's backward from a grad_output (middle/first stage) or from the loss
//               (last stage); with fp16 loss scaling, scaled by the LossScaler and unscaled again
//               by gradient hooks before anything is accumulated, so parameter gradients (.grad)
//               and the input gradient sent upstream are always unscaled float32
//   to_host     device -> host in the wire dtype (float32 for activations and gradients): on CUDA
//               cast on the device, copied into a pooled pinned buffer on the copy stream
//               (HostStaging::to_host_async) and waited for; on the CPU the tensor itself when it
//               already has that dtype, else converted into a pooled buffer
//   after_step  after the stage's optimizer step: grows or backs off the loss scale
//
// Why gradients never hold a scaled value: the peers of a stage may hold different scales (a
// joiner starts at the initial one), so what they average must be unscaled; unscaling in the
// gradient hooks (exact: scales are powers of two) means averaging, hand-offs, checkpoints and the
// optimizer see plain gradients. An fp16 overflow leaves an inf/nan in the unscaled gradient; the
// averaged sum then has it on every peer of the stage, StageOptimizer::step skips the update on
// the non-finite norm (identically everywhere, it sees the same averaged gradient) and
// after_step(skipped = true) halves the scale on every peer.
//
// Master weights and optimizer state stay float32. Not thread-safe: one compute thread per worker
// (the one that also runs the optimizer step), except staging_stats().
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Stream.h>
#include <c10/util/Optional.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "worker/model/precision.h"
#include "worker/model/staging.h"

namespace swarm::model {

class StageModel;

struct StageComputeOptions {
  LossScalerConfig scaler;            // fp16 dynamic loss scaling
  bool force_loss_scaling = false;    // tests: scale even where fp16 computes in fp32 (CPU)
  bool pin = true;                    // pinned staging buffers where possible (CUDA)
  size_t max_idle_staging_bytes = size_t(1) << 30;
};

class StageCompute {
 public:
  // `precision`: the requested one (pick_precision resolved "auto"); what runs is
  // effective_precision(device, precision). Loss scaling is on when fp16 actually runs (CUDA) or
  // when options.force_loss_scaling.
  StageCompute(c10::Device device, Precision precision, const StageComputeOptions& options = {});
  ~StageCompute();
  StageCompute(const StageCompute&) = delete;
  StageCompute& operator=(const StageCompute&) = delete;

  c10::Device device() const { return device_; }
  Precision requested_precision() const { return requested_; }
  Precision precision() const { return effective_; }  // what the forward computes in
  bool loss_scaling() const { return scaling_; }
  const LossScaler& scaler() const { return scaler_; }  // compute thread only
  LossScaler& scaler() { return scaler_; }
  // Safe from any thread: the scale as of the last backward or step (0 without loss scaling), and
  // the steps skipped on a non-finite gradient.
  double loss_scale() const { return scaling_ ? scale_seen_.load() : 0.0; }
  int64_t skipped_steps() const { return skipped_seen_.load(); }
  // "bf16 on cpu", "fp16 (fp32 on cpu)", "fp16 on cuda:0, loss scale 65536"; any thread.
  std::string describe() const;

  at::Tensor to_device(const at::Tensor& host);
  at::Tensor forward(StageModel& model, const at::Tensor& input);

  // Backpropagates grad_output (any device, cast to output's dtype) through `output`; `input`
  // (a leaf that requires grad, or undefined) gets its unscaled gradient.
  void backward(StageModel& model, const at::Tensor& output, const at::Tensor& grad_output,
                const at::Tensor& input);
  // Backpropagates a scalar loss (already weighted, e.g. loss x samples).
  void backward_loss(StageModel& model, const at::Tensor& loss, const at::Tensor& input);

  // A contiguous host tensor of `dtype`, safe to read (copies waited for).
  at::Tensor to_host(const at::Tensor& tensor, c10::ScalarType dtype = c10::ScalarType::Float);

  // The stage's optimizer stepped; `skipped`: it found a non-finite gradient and did not update.
  // No-op without loss scaling.
  void after_step(bool skipped);

  HostStaging::Stats staging_stats() const { return staging_.stats(); }
  HostStaging& staging() { return staging_; }

 private:
  void run_backward(StageModel& model, const at::Tensor& root, const at::Tensor& grad,
                    const at::Tensor& input);

  c10::Device device_;
  Precision requested_;
  Precision effective_;
  bool scaling_;
  LossScaler scaler_;
  std::atomic<double> scale_seen_;
  std::atomic<int64_t> skipped_seen_{0};
  HostStaging staging_;
  c10::optional<c10::Stream> copy_stream_;
};

}  // namespace swarm::model
