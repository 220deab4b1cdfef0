// Approximate compute cost of a pipeline stage: pure arithmetic on the model's shape, for the
// rebalancer's estimate of a moved peer's speed on its new stage and for benchmarks' FLOP rates.
#pragma once

#include <cstdint>
#include <vector>

namespace swarm::planner {

// The sizes that decide a stage's cost (the job's spec.model; defaults: the tiny-lm job's gpt2).
struct StageShape {
  int64_t vocab_size = 256;
  int64_t hidden_size = 192;
  int64_t layers = 2;  // decoder layers of the stage
  int64_t sequence_length = 128;
  int64_t intermediate_size = 768;  // MLP width
  int64_t num_heads = 6;
  int64_t kv_heads = 6;    // grouped-query attention (llama): k and v have this many heads
  int64_t head_dim = 32;
  bool gated_mlp = false;  // SwiGLU (llama): gate, up and down matrices instead of fc1 and fc2
};

// Forward FLOPs for one sample of sequence_length tokens (2 per multiply-add), matmul-dominated:
// per layer and token, with Q = num_heads * head_dim and KV = kv_heads * head_dim,
// 2*(H*Q + 2*H*KV + Q*H) for the q, k, v and output projections, 2*m*H*I for the MLP (m = 2, or 3
// gated), and 2*2*T*Q for the attention scores and weighted sum (the full T x T product, as
// the unfused form computes it); plus 2*H*V per token for the LM head on the last stage. For gpt2
// (Q = KV = H) the projections are 2*(3H*H + H*H). Embedding lookups, norms, softmax, rotary
// embeddings and activations are ignored. Shared layers cost the same as distinct ones (reused
// weights, same compute). A backward costs about twice the forward.
double stage_flops_per_sample(const StageShape& shape, bool last);

// stage_flops_per_sample of each stage, stage s holding stage_layers[s] layers (the last one
// carries the LM head); `shape.layers` is not read.
std::vector<double> stage_costs(const StageShape& shape, const std::vector<int64_t>& stage_layers);

}  // namespace swarm::planner
