#include "worker/runtime/job_model.h"

#include <stdexcept>

#include "planner/flops.h"

namespace swarm::runtime {

model::ModelConfig model_config(const JobSpec& spec) {
  model::ModelConfig c;
  c.vocab_size = spec.model.vocab_size;
  c.hidden_size = spec.model.hidden_size;
  c.num_heads = spec.model.num_heads;
  c.layers_per_stage = spec.model.layers_per_stage;
  c.sequence_length = spec.model.sequence_length;
  c.mlp_ratio = spec.model.mlp_ratio;
  c.num_stages = spec.pipeline.stages;
  c.shared_layers = spec.model.shared_layers;
  return c;
}

model::OptimizerConfig optimizer_config(const JobSpec& spec) {
  const auto& o = spec.training.optimizer;
  const auto& s = spec.training.schedule;
  model::OptimizerConfig c;
  c.kind = o.name == OptimizerKind::Lamb ? model::OptimizerConfig::Lamb : model::OptimizerConfig::AdamW;
  c.lr = o.learning_rate;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.epsilon;
  c.weight_decay = o.weight_decay;
  c.grad_clip = o.grad_clip;
  switch (s.kind) {
    case ScheduleKind::Constant: c.schedule = model::OptimizerConfig::Constant; break;
    case ScheduleKind::Linear: c.schedule = model::OptimizerConfig::Linear; break;
    case ScheduleKind::Cosine: c.schedule = model::OptimizerConfig::Cosine; break;
  }
  c.warmup_steps = s.warmup_steps;
  c.max_steps = spec.training.max_steps;
  c.min_lr_ratio = s.min_learning_rate_ratio;
  return c;
}

std::vector<double> stage_costs(const JobSpec& spec) {
  planner::StageShape shape;
  shape.vocab_size = spec.model.vocab_size;
  shape.hidden_size = spec.model.hidden_size;
  shape.layers_per_stage = spec.model.layers_per_stage;
  shape.sequence_length = spec.model.sequence_length;
  shape.mlp_ratio = spec.model.mlp_ratio;
  return planner::stage_costs(shape, spec.pipeline.stages);
}

uint64_t stage_seed(const JobSpec& spec) { return spec.training.seed; }

}  // namespace swarm::runtime
