#include "worker/model/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "worker/model/optimizer.h"

namespace swarm::model {

Precision parse_precision(const std::string& text) {
  if (text == "fp32" || text == "float32") return Precision::Float32;
  if (text == "bf16" || text == "bfloat16") return Precision::BFloat16;
  if (text == "fp16" || text == "float16") return Precision::Float16;
  throw std::invalid_argument("unknown precision '" + text +
                              "' (expected fp32, bf16 or fp16; auto where a setting allows it)");
}

Precision pick_precision(const std::string& setting, c10::Device device) {
  if (setting == "auto") return device.is_cuda() ? Precision::BFloat16 : Precision::Float32;
  return parse_precision(setting);
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::Float32: return "fp32";
    case Precision::BFloat16: return "bf16";
    case Precision::Float16: return "fp16";
  }
  return "?";
}

c10::ScalarType precision_dtype(Precision precision) {
  switch (precision) {
    case Precision::BFloat16: return c10::ScalarType::BFloat16;
    case Precision::Float16: return c10::ScalarType::Half;
    case Precision::Float32: break;
  }
  return c10::ScalarType::Float;
}

Precision effective_precision(c10::Device device, Precision precision) {
  if (precision == Precision::Float16 && !device.is_cuda()) return Precision::Float32;
  if (!device.is_cuda() && !device.is_cpu()) return Precision::Float32;
  return precision;
}

bool built_with_cuda() {
#ifdef SWARM_MODEL_CUDA
  return true;
#else
  return false;
#endif
}

// ---- ComputeScope ----

namespace {

// PyTorch 2.4 made the autocast C++ API device-generic and deprecated the per-device functions
// (they warn on every call there and are slated for removal); 1.13 .. 2.3 only have the latter.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool enabled_(c10::DeviceType t) { return at::autocast::is_autocast_enabled(t); }
void set_autocast(c10::DeviceType t, bool on) { at::autocast::set_autocast_enabled(t, on); }
c10::ScalarType dtype_(c10::DeviceType t) { return at::autocast::get_autocast_dtype(t); }
void set_autocast_dtype(c10::DeviceType t, c10::ScalarType d) {
  at::autocast::set_autocast_dtype(t, d);
}
#else
bool is_cuda(c10::DeviceType t) { return t == c10::DeviceType::CUDA; }
bool enabled_(c10::DeviceType t) {
  return is_cuda(t) ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_autocast(c10::DeviceType t, bool on) {
  if (is_cuda(t)) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
}
c10::ScalarType dtype_(c10::DeviceType t) {
  return is_cuda(t) ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(c10::DeviceType t, c10::ScalarType d) {
  if (is_cuda(t)) {
    at::autocast::set_autocast_gpu_dtype(d);
  } else {
    at::autocast::set_autocast_cpu_dtype(d);
  }
}
#endif

}  // namespace

bool autocast_enabled(c10::DeviceType type) { return enabled_(type); }
c10::ScalarType autocast_dtype(c10::DeviceType type) { return dtype_(type); }

ComputeScope::ComputeScope(c10::Device device, Precision precision)
    : type_(device.type()), precision_(effective_precision(device, precision)) {
  if (precision_ == Precision::Float32) return;
  prev_enabled_ = autocast_enabled(type_);
  prev_dtype_ = autocast_dtype(type_);
  set_autocast_dtype(type_, precision_dtype(precision_));
  set_autocast(type_, true);
  at::autocast::increment_nesting();
  active_ = true;
}

ComputeScope::~ComputeScope() {
  if (!active_) return;
  // The cast cache holds low-precision copies of the fp32 weights for the outermost region.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(type_, prev_enabled_);
  set_autocast_dtype(type_, prev_dtype_);
}

// ---- LossScaler ----

void validate(const LossScalerConfig& c) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("LossScalerConfig: " + what);
  };
  if (!(c.init_scale > 0) || !std::isfinite(c.init_scale)) fail("init_scale must be positive");
  if (!(c.growth_factor > 1)) fail("growth_factor must be > 1");
  if (!(c.backoff_factor > 0 && c.backoff_factor < 1)) fail("backoff_factor must be in (0, 1)");
  if (c.growth_interval < 1) fail("growth_interval must be >= 1");
  if (!(c.min_scale > 0) || !(c.min_scale <= c.max_scale) || !std::isfinite(c.max_scale)) {
    fail("need 0 < min_scale <= max_scale < inf");
  }
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  validate(config_);
  scale_ = std::clamp(config_.init_scale, config_.min_scale, config_.max_scale);
}

void LossScaler::set_scale(double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) {
    throw std::invalid_argument("LossScaler::set_scale: scale must be positive and finite");
  }
  scale_ = std::clamp(scale, config_.min_scale, config_.max_scale);
  good_steps_ = 0;
}

void LossScaler::unscale_(const std::vector<at::Tensor>& grads) const {
  torch::NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  for (const auto& g : grads) {
    if (g.defined()) g.mul_(inv);  // Tensor is a handle: in-place ops are const
  }
}

void LossScaler::unscale_(torch::nn::Module& model) const {
  std::vector<at::Tensor> grads;
  for (auto& p : model.parameters()) {
    if (p.grad().defined()) grads.push_back(p.mutable_grad());
  }
  unscale_(grads);
}

bool LossScaler::all_finite(const std::vector<at::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> bad;
  for (const auto& t : tensors) {
    if (t.defined() && t.numel() > 0) bad.push_back(t.isfinite().logical_not().any().reshape({1}));
  }
  if (bad.empty()) return true;
  return !torch::cat(bad).any().item<bool>();
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = std::max(config_.min_scale, scale_ * config_.backoff_factor);
    good_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++good_steps_ >= config_.growth_interval) {
    scale_ = std::min(config_.max_scale, scale_ * config_.growth_factor);
    good_steps_ = 0;
  }
}

bool LossScaler::step(torch::nn::Module& model, StageOptimizer& optimizer) {
  unscale_(model);
  optimizer.step();
  const bool found_inf = !std::isfinite(optimizer.last_grad_norm());
  update(found_inf);
  return !found_inf;
}

}  // namespace swarm::model
