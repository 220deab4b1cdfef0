#include "worker/model/optimizer.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace swarm::model {
namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

void validate(const OptimizerConfig& c) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("OptimizerConfig: " + what);
  };
  if (!(c.lr >= 0)) fail("lr must be >= 0");
  if (!(c.beta1 >= 0 && c.beta1 < 1)) fail("beta1 must lie in [0, 1)");
  if (!(c.beta2 >= 0 && c.beta2 < 1)) fail("beta2 must lie in [0, 1)");
  if (!(c.eps > 0)) fail("eps must be > 0");
  if (!(c.weight_decay >= 0)) fail("weight_decay must be >= 0");
  if (!(c.grad_clip >= 0)) fail("grad_clip must be >= 0 (0 disables clipping)");
  if (c.warmup_steps < 0) fail("warmup_steps must be >= 0");
  if (c.max_steps < 0) fail("max_steps must be >= 0");
  if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1)) fail("min_lr_ratio must lie in [0, 1]");
}

double lr_at(const OptimizerConfig& c, int64_t step) {
  if (step < 0) step = 0;
  if (c.warmup_steps > 0 && step < c.warmup_steps) {
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  }
  if (c.schedule == OptimizerConfig::Constant || c.max_steps <= c.warmup_steps) return c.lr;
  double progress = static_cast<double>(step - c.warmup_steps) /
                    static_cast<double>(c.max_steps - c.warmup_steps);
  progress = std::min(1.0, std::max(0.0, progress));
  const double m = c.min_lr_ratio;
  if (c.schedule == OptimizerConfig::Linear) return c.lr * (1.0 - (1.0 - m) * progress);
  return c.lr * (m + (1.0 - m) * 0.5 * (1.0 + std::cos(kPi * progress)));
}

const char* kind_name(OptimizerConfig::Kind kind) {
  return kind == OptimizerConfig::Lamb ? "lamb" : "adamw";
}

StageOptimizer::StageOptimizer(torch::nn::Module& model, const OptimizerConfig& config)
    : config_(config), last_grad_norm_(std::numeric_limits<double>::quiet_NaN()) {
  validate(config);
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const auto& p = item.value();
    names_.push_back(item.key());
    params_.push_back(p);
    exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    const bool embedding = item.key().rfind("embed.", 0) == 0;
    decay_.push_back(p.dim() >= 2 && !embedding);
  }
}

void StageOptimizer::zero_grad() {
  torch::NoGradGuard no_grad;
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void StageOptimizer::step() {
  torch::NoGradGuard no_grad;
  const double lr = lr_at(step_count_);
  last_lr_ = lr;

  // Global gradient norm of the stage (one host sync).
  std::vector<torch::Tensor> grads;
  for (auto& p : params_) {
    if (p.grad().defined()) grads.push_back(p.grad().detach());
  }
  double norm = 0.0;
  if (!grads.empty()) {
#if TORCH_VERSION_MAJOR >= 2
    auto norms = at::_foreach_norm(grads, 2);  // one kernel launch per dtype/device, not per tensor
#else
    std::vector<torch::Tensor> norms;
    for (auto& g : grads) norms.push_back(g.norm(2));
#endif
    for (auto& n : norms) n = n.to(torch::kFloat);
    norm = torch::stack(norms).norm(2).item<double>();
  }
  last_grad_norm_ = norm;
  ++step_count_;
  if (!std::isfinite(norm)) {
    ++skipped_steps_;
    zero_grad();
    return;
  }
  const double clip_coef =
      (config_.grad_clip > 0 && norm > config_.grad_clip) ? config_.grad_clip / (norm + 1e-6) : 1.0;

  ++moment_steps_;
  const double b1 = config_.beta1, b2 = config_.beta2;
  if (config_.kind == OptimizerConfig::AdamW && fused_adamw_step(lr, clip_coef)) {
    zero_grad();
    return;
  }
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(moment_steps_));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(moment_steps_));
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    if (!p.grad().defined()) continue;
    auto g = p.grad().detach();
    if (clip_coef != 1.0) g.mul_(clip_coef);
    auto& m = exp_avg_[i];
    auto& v = exp_avg_sq_[i];
    if (m.device() != p.device() || m.scalar_type() != p.scalar_type()) {
      m = m.to(p.device(), p.scalar_type());
      v = v.to(p.device(), p.scalar_type());
    }
    const double wd = decay_[i] ? config_.weight_decay : 0.0;
    m.mul_(b1).add_(g, 1.0 - b1);
    v.mul_(b2).addcmul_(g, g, 1.0 - b2);
    auto denom = (v.sqrt() / std::sqrt(bc2)).add_(config_.eps);
    if (config_.kind == OptimizerConfig::AdamW) {
      // Same order of operations as torch::optim::AdamW (decoupled decay first).
      if (wd != 0.0) p.mul_(1.0 - lr * wd);
      p.addcdiv_(m, denom, -lr / bc1);
    } else {
      // LAMB: Adam direction (+ decoupled decay) scaled per tensor by ||w|| / ||update||.
      auto update = (m / bc1).div_(denom);
      if (wd != 0.0) update.add_(p, wd);
      auto w_norm = p.norm(2);
      auto u_norm = update.norm(2);
      auto trust = torch::where((w_norm > 0).logical_and(u_norm > 0), w_norm / u_norm,
                                torch::ones_like(w_norm));
      p.add_(update.mul_(trust), -lr);
    }
  }
  zero_grad();
}

bool StageOptimizer::fused_adamw_step(double lr, double clip_coef) {
#if TORCH_VERSION_MAJOR >= 2
  // libtorch's fused AdamW kernel (vectorized, one pass over each parameter, the same formula as the
  // loop in step(): decoupled decay, then m / (sqrt(v) / sqrt(bc2) + eps) scaled by lr / bc1), for
  // two groups: decayed and not. It needs every parameter with a gradient, all float32 on one
  // device, moments alike; anything else takes the per-tensor loop.
  std::vector<torch::Tensor> group_p[2], group_g[2], group_m[2], group_v[2];
  const auto device = params_.empty() ? c10::Device(c10::kCPU) : params_[0].device();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (!p.grad().defined() || p.scalar_type() != torch::kFloat || p.device() != device ||
        p.grad().scalar_type() != torch::kFloat || exp_avg_[i].scalar_type() != torch::kFloat ||
        exp_avg_[i].device() != device || exp_avg_sq_[i].device() != device) {
      return false;
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const int g = decay_[i] && config_.weight_decay != 0.0 ? 1 : 0;
    group_p[g].push_back(params_[i]);
    group_g[g].push_back(params_[i].grad());
    group_m[g].push_back(exp_avg_[i]);
    group_v[g].push_back(exp_avg_sq_[i]);
  }
  if (clip_coef != 1.0) {
    for (auto& grads : group_g) {
      if (!grads.empty()) at::_foreach_mul_(grads, clip_coef);
    }
  }
  // The step count the bias corrections use; the kernel reads it, Python's optimizer bumps it.
  const auto step = torch::full({}, static_cast<double>(moment_steps_),
                                torch::TensorOptions().dtype(torch::kFloat).device(device));
  for (int g = 0; g < 2; ++g) {
    if (group_p[g].empty()) continue;
    const std::vector<torch::Tensor> steps(group_p[g].size(), step);
    at::_fused_adamw_(group_p[g], group_g[g], group_m[g], group_v[g], /*max_exp_avg_sqs=*/{}, steps,
                      lr, config_.beta1, config_.beta2, g == 1 ? config_.weight_decay : 0.0,
                      config_.eps, /*amsgrad=*/false, /*maximize=*/false);
  }
  return true;
#else
  (void)lr;
  (void)clip_coef;
  return false;  // libtorch 1.13 has no fused AdamW on the CPU
#endif
}

}  // namespace swarm::model
