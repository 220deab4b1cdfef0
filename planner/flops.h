// Approximate compute cost of a pipeline stage: pure arithmetic on the model's shape, for the
// rebalancer's estimate of a moved peer's speed on its new stage and for benchmarks' FLOP rates.
#pragma once

#include <cstdint>
#include <vector>

namespace swarm::planner {

// The sizes that decide a stage's cost (the job's spec.model).
struct StageShape {
  int64_t vocab_size = 256;
  int64_t hidden_size = 192;
  int64_t layers_per_stage = 2;
  int64_t sequence_length = 128;
  int64_t mlp_ratio = 4;
};

// Forward FLOPs for one sample of sequence_length tokens (2 per multiply-add), matmul-dominated:
// per layer and token 2*(3H*H + H*H + 2*mlp_ratio*H*H) for the projections plus 2*2*T*H for the
// attention scores and weighted sum (the full T x T product is computed; the mask does not save
// work); plus 2*H*V per token for the LM head on the last stage. Embedding lookups, LayerNorm,
// softmax and GELU are ignored. Shared layers cost the same as distinct ones (reused weights,
// same compute). A backward costs about twice the forward.
double stage_flops_per_sample(const StageShape& shape, bool last);

// stage_flops_per_sample of each of `stages` stages (the last one carries the LM head).
std::vector<double> stage_costs(const StageShape& shape, int64_t stages);

}  // namespace swarm::planner
