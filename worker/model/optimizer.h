// StageOptimizer: the common optimizer step every peer of a stage applies after gradient
// averaging. Global-norm clipping, then AdamW or LAMB, with a warmup + decay LR schedule.
//
// Both update rules are implemented here (AdamW follows torch::optim::AdamW's arithmetic exactly,
// which a test checks) so that the whole state — moments, moment step, schedule step — is plain
// tensors and counters that state.h can serialize and a joining peer can restore bit for bit.
// Weight decay applies only to matrices (dim >= 2) outside the embedding ("embed." prefix):
// LayerNorm gains, biases and embeddings are not decayed.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace swarm::model {

struct OptimizerConfig {
  enum Kind { AdamW, Lamb };
  enum Schedule { Constant, Linear, Cosine };

  Kind kind = AdamW;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.01;
  double grad_clip = 1.0;  // max global grad norm of the stage; 0 = no clipping
  Schedule schedule = Constant;
  int64_t warmup_steps = 0;  // linear warmup: step s < warmup uses lr * (s+1) / warmup
  int64_t max_steps = 0;     // decay ends here; <= warmup_steps means no decay
  double min_lr_ratio = 0.0; // Linear/Cosine decay to lr * min_lr_ratio at max_steps (then flat)
};

// Throws std::invalid_argument for a negative lr, betas outside [0,1), eps <= 0, negative
// weight decay / clip / warmup, or min_lr_ratio outside [0,1].
void validate(const OptimizerConfig& config);

// Learning rate used by optimizer step number `step` (0-based: the first step is step 0).
double lr_at(const OptimizerConfig& config, int64_t step);

const char* kind_name(OptimizerConfig::Kind kind);  // "adamw" | "lamb"

class StageOptimizer {
 public:
  // Takes every parameter of `model` (named_parameters order). Moments are zeros like the
  // parameters; they follow the parameters to another device lazily at the next step.
  StageOptimizer(torch::nn::Module& model, const OptimizerConfig& config);

  double lr_at(int64_t step) const { return swarm::model::lr_at(config_, step); }

  // Clips (global norm over the stage's gradients; grad_clip 0 = off), applies the update with
  // lr_at(step_count()), increments step_count() and zeroes the gradients. Parameters without a
  // gradient are left alone. A non-finite gradient norm skips the update (the step still counts,
  // so peers stay aligned on the schedule) and increments skipped_steps().
  void step();
  void zero_grad();

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t step) { step_count_ = step; }
  double last_grad_norm() const { return last_grad_norm_; }  // before clipping; NaN before 1st
  double last_lr() const { return last_lr_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  const OptimizerConfig& config() const { return config_; }

  // State, in parameter order (for state.h and tests).
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  const std::vector<bool>& decayed() const { return decay_; }
  std::vector<at::Tensor>& exp_avg() { return exp_avg_; }
  std::vector<at::Tensor>& exp_avg_sq() { return exp_avg_sq_; }
  // Number of moment updates so far (drives bias correction; equals step_count() unless
  // set_step_count moved the schedule).
  int64_t moment_steps() const { return moment_steps_; }
  void set_moment_steps(int64_t n) { moment_steps_ = n; }

 private:
  // AdamW through libtorch's fused kernel (libtorch 2.x, every parameter with a float32 gradient
  // on one device): clips by clip_coef and updates; false when it cannot (step() then loops).
  bool fused_adamw_step(double lr, double clip_coef);

  OptimizerConfig config_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_;
  std::vector<bool> decay_;
  int64_t step_count_ = 0;
  int64_t moment_steps_ = 0;
  int64_t skipped_steps_ = 0;
  double last_grad_norm_;
  double last_lr_ = 0.0;
};

}  // namespace swarm::model
