// How many decoder layers each pipeline stage holds so the stages cost about the same: the first
// stage also holds the token embedding and the last one the final norm and the LM head, whose
// cost (the head's V x H product per token) can be several layers' worth. Pure arithmetic, for
// `swarm job from-hf` (spec.pipeline.layersPerStage of an imported checkpoint).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/flops.h"

namespace swarm::planner {

// Cost per sample (forward FLOPs, 2 per multiply-add; a backward costs about twice as much for
// each part alike) of one layer, and of what the first and the last stage hold besides.
struct SplitCosts {
  double layer = 1;      // one decoder layer
  double embedding = 0;  // extra on the first stage
  double head = 0;       // extra on the last stage
};

// A layer and the head as flops.h counts them (stage_flops_per_sample: projections with
// grouped-query attention, the MLP, attention over T; the head's 2 H V per token). The embedding
// is a lookup without multiply-adds, but its backward writes a dense [V, H] gradient: counted as
// 2 V H per sample (one multiply-add per value), a small share beside the head.
SplitCosts split_costs(const StageShape& shape);

// Layers per stage (each at least 1, summing to `layers`) that minimise the most expensive
// stage. A layer that would cost the same on two stages goes to the later one: deterministic.
// Requires 1 <= stages <= layers (throws std::invalid_argument otherwise).
std::vector<int64_t> balanced_layers(int64_t layers, int64_t stages, const SplitCosts& costs);

// Each stage's cost under a split (the first adds the embedding, the last the head).
std::vector<double> split_stage_costs(const std::vector<int64_t>& layers_per_stage, const SplitCosts& costs);

}  // namespace swarm::planner
