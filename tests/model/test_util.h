// Shared helpers for the model tests (small configs, fixed batches).
#pragma once

#include <torch/torch.h>

#include "worker/model/config.h"

namespace swarm::model::testing {

inline ModelConfig tiny_config(int64_t stages = 3, bool shared = false) {
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.num_heads = 4;
  c.sequence_length = 16;
  c.num_stages = stages;
  c.set_uniform_layers(2);
  c.gpt2.intermediate_size = 4 * c.hidden_size;
  c.gpt2.shared_layers = shared;
  return c;
}

// A small llama: 3 uneven stages, grouped-query attention (4 query heads over 2 k/v heads) with a
// head width (12) other than hidden / heads (8), Llama 3 rope scaling (the context of 8 positions
// it was "trained" for is shorter than the 16 used, so every frequency band is exercised),
// attention biases, no MLP biases.
inline ModelConfig tiny_llama_config(int64_t stages = 3) {
  ModelConfig c = tiny_config(stages);
  c.architecture = Architecture::Llama;
  if (stages == 3) c.stage_layers = {1, 2, 1};
  c.llama.intermediate_size = 48;
  c.llama.num_kv_heads = 2;
  c.llama.head_dim = 12;
  c.llama.rms_norm_eps = 1e-6;
  c.llama.rope_theta = 500.0;
  c.llama.rope_scaling = {4.0, 1.0, 4.0, 8};
  c.llama.attention_bias = true;
  return c;
}

inline torch::Tensor random_tokens(const ModelConfig& c, int64_t batch, int64_t seq,
                                   uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randint(c.vocab_size, {batch, seq}, gen, torch::kLong);
}

}  // namespace swarm::model::testing
