#include "worker/model/stage_compute.h"

#include <torch/torch.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "worker/model/device.h"
#include "worker/model/stage.h"

namespace swarm::model {

StageCompute::StageCompute(c10::Device device, Precision precision, const StageComputeOptions& options)
    : device_(device),
      requested_(precision),
      effective_(effective_precision(device, precision)),
      scaling_(effective_ == Precision::Float16 ||
               (options.force_loss_scaling && precision == Precision::Float16)),
      scaler_(options.scaler),
      scale_seen_(scaler_.scale()),
      staging_(options.pin, options.max_idle_staging_bytes),
      copy_stream_(HostStaging::copy_stream(device)) {}

StageCompute::~StageCompute() = default;

std::string StageCompute::describe() const {
  std::string s = precision_name(requested_);
  if (effective_ != requested_) s += std::string(" (") + precision_name(effective_) + " on " + device_string(device_) + ")";
  else s += " on " + device_string(device_);
  if (scaling_) {
    // %g: 65536 prints as such, and a scale beyond int64 (a test's 2^126) prints as 8.50706e+37.
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%g", loss_scale());
    s += std::string(", loss scale ") + scale;
  }
  return s;
}

at::Tensor StageCompute::to_device(const at::Tensor& host) {
  if (!host.device().is_cpu()) return host.to(device_);
  return staging_.to_device_async(host, device_, copy_stream_);
}

at::Tensor StageCompute::forward(StageModel& model, const at::Tensor& input) {
  ComputeScope scope(device_, effective_);
  return model.forward(input);
}

void StageCompute::run_backward(StageModel& model, const at::Tensor& root, const at::Tensor& grad,
                                const at::Tensor& input) {
  if (!scaling_) {
    torch::autograd::backward({root}, {grad});
    return;
  }
  // Scaled backward; every leaf's gradient is unscaled by a hook before it is accumulated, so
  // .grad and input.grad() never hold a scaled value (see the header).
  const double scale = scaler_.scale();
  scale_seen_ = scale;
  const double inv = 1.0 / scale;
  auto unscale = [inv](const at::Tensor& g) { return g.mul(inv); };
  std::vector<std::pair<at::Tensor, unsigned>> hooks;
  for (auto& p : model.parameters()) {
    if (p.requires_grad()) hooks.emplace_back(p, p.register_hook(unscale));
  }
  if (input.defined() && input.requires_grad() && input.is_leaf())
    hooks.emplace_back(input, input.register_hook(unscale));
  auto remove = [&] {
    for (auto& [t, h] : hooks) t.remove_hook(h);
  };
  try {
    torch::autograd::backward({root}, {grad.mul(scale)});
  } catch (...) {
    remove();
    throw;
  }
  remove();
}

void StageCompute::backward(StageModel& model, const at::Tensor& output, const at::Tensor& grad_output,
                            const at::Tensor& input) {
  at::Tensor g = grad_output.device().is_cpu() && !output.device().is_cpu() ? to_device(grad_output)
                                                                              : grad_output.to(output.device());
  if (g.scalar_type() != output.scalar_type()) g = g.to(output.scalar_type());
  run_backward(model, output, g, input);
}

void StageCompute::backward_loss(StageModel& model, const at::Tensor& loss, const at::Tensor& input) {
  run_backward(model, loss, torch::ones_like(loss), input);
}

at::Tensor StageCompute::to_host(const at::Tensor& tensor, c10::ScalarType dtype) {
  at::Tensor src = tensor.detach();
  if (src.device().is_cpu()) {
    if (src.scalar_type() == dtype) return src.is_contiguous() ? src : src.contiguous();
    // A bf16/fp16 result converted for the wire: into a pooled buffer, no allocation per request.
    at::Tensor dst = staging_.host_buffer(src.sizes(), dtype);
    dst.copy_(src);
    return dst;
  }
  if (src.scalar_type() != dtype) src = src.to(dtype);  // on the device (caching allocator)
  HostCopy copy = staging_.to_host_async(src, copy_stream_);
  copy.wait();
  return copy.tensor;
}

void StageCompute::after_step(bool skipped) {
  if (!scaling_) return;
  scaler_.update(skipped);
  scale_seen_ = scaler_.scale();
  skipped_seen_ = scaler_.skipped_steps();
}

}  // namespace swarm::model
