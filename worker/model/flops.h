// Approximate compute cost of a stage, for benchmarks and load estimates.
#pragma once

#include "worker/model/config.h"

namespace swarm::model {

// Forward FLOPs for one sample of sequence_length tokens (2 per multiply-add), matmul-dominated:
// per layer and token 2*(3H*H + H*H + 2*mlp_ratio*H*H) for the projections plus 2*2*T*H for the
// attention scores and weighted sum (the full T x T product is computed; the mask does not save
// work); plus 2*H*V per token for the LM head on the last stage. Embedding lookups, LayerNorm,
// softmax and GELU are ignored. Shared layers cost the same as distinct ones (reused weights,
// same compute). A backward costs about twice the forward.
double stage_flops_per_sample(const ModelConfig& config, bool first, bool last);

}  // namespace swarm::model
