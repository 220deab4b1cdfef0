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

inline torch::Tensor random_tokens(const ModelConfig& c, int64_t batch, int64_t seq,
                                   uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randint(c.vocab_size, {batch, seq}, gen, torch::kLong);
}

}  // namespace swarm::model::testing
