#include "worker/runtime/job_model.h"

#include <stdexcept>

#include "planner/flops.h"

namespace swarm::runtime {

model::ModelConfig model_config(const JobSpec& spec) {
  const ModelSpec& m = spec.model;
  model::ModelConfig c;
  c.vocab_size = m.vocab_size;
  c.hidden_size = m.hidden_size;
  c.num_heads = m.num_heads;
  c.sequence_length = m.sequence_length;
  c.num_stages = spec.pipeline.stages;
  c.stage_layers = stage_layers(spec);
  const int64_t width = m.intermediate_size > 0 ? m.intermediate_size : m.mlp_ratio * m.hidden_size;
  if (m.architecture == Architecture::Llama) {
    c.architecture = model::Architecture::Llama;
    model::LlamaParams& l = c.llama;
    l.intermediate_size = width;
    l.num_kv_heads = m.num_key_value_heads > 0 ? m.num_key_value_heads : m.num_heads;
    l.head_dim = m.head_dim > 0 ? m.head_dim : (m.num_heads > 0 ? m.hidden_size / m.num_heads : 0);
    l.rms_norm_eps = m.norm_eps;
    l.rope_theta = m.rope_theta;
    if (m.rope_scaling) {
      l.rope_scaling.factor = m.rope_scaling->factor;
      l.rope_scaling.low_freq_factor = m.rope_scaling->low_freq_factor;
      l.rope_scaling.high_freq_factor = m.rope_scaling->high_freq_factor;
      l.rope_scaling.original_max_position_embeddings = m.rope_scaling->original_max_position_embeddings;
    }
    l.attention_bias = m.attention_bias.value_or(false);
    l.mlp_bias = m.mlp_bias.value_or(false);
  } else {
    c.architecture = model::Architecture::Gpt2;
    c.gpt2.intermediate_size = width;
    c.gpt2.shared_layers = m.shared_layers;
    c.gpt2.layer_norm_eps = m.norm_eps;
  }
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

planner::StageShape stage_shape(const model::ModelConfig& c) {
  planner::StageShape shape;
  shape.vocab_size = c.vocab_size;
  shape.hidden_size = c.hidden_size;
  shape.sequence_length = c.sequence_length;
  shape.intermediate_size = c.intermediate_size();
  shape.num_heads = c.num_heads;
  shape.kv_heads = c.kv_heads();
  shape.head_dim = c.head_dim();
  shape.gated_mlp = c.is_llama();
  return shape;
}

std::vector<double> stage_costs(const JobSpec& spec) {
  const auto config = model_config(spec);
  return planner::stage_costs(stage_shape(config), config.stage_layers);
}

uint64_t stage_seed(const JobSpec& spec) { return spec.training.seed; }

}  // namespace swarm::runtime
