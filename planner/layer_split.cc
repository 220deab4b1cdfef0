#include "planner/layer_split.h"

#include <stdexcept>
#include <string>

namespace swarm::planner {

SplitCosts split_costs(const StageShape& shape) {
  StageShape one = shape;
  one.layers = 1;
  StageShape head_only = shape;
  head_only.layers = 0;
  SplitCosts c;
  c.layer = stage_flops_per_sample(one, false);
  c.head = stage_flops_per_sample(head_only, true);
  c.embedding = 2.0 * static_cast<double>(shape.vocab_size) * static_cast<double>(shape.hidden_size);
  return c;
}

std::vector<double> split_stage_costs(const std::vector<int64_t>& layers_per_stage, const SplitCosts& c) {
  std::vector<double> out;
  const size_t n = layers_per_stage.size();
  for (size_t s = 0; s < n; ++s)
    out.push_back(static_cast<double>(layers_per_stage[s]) * c.layer + (s == 0 ? c.embedding : 0.0) +
                  (s + 1 == n ? c.head : 0.0));
  return out;
}

std::vector<int64_t> balanced_layers(int64_t layers, int64_t stages, const SplitCosts& c) {
  if (stages < 1 || layers < stages)
    throw std::invalid_argument("balanced_layers: " + std::to_string(layers) + " layers cannot fill " +
                                std::to_string(stages) + " stages of at least one layer each");
  if (!(c.layer > 0)) throw std::invalid_argument("balanced_layers: a layer's cost must be positive");
  // Every stage starts with one layer; each further layer goes where the stage's cost after
  // taking it is lowest. With identical layers this greedy choice minimises the maximum (each
  // step keeps the smallest possible new maximum), and ties go to the later stage, so the
  // same inputs always give the same split.
  std::vector<int64_t> n(static_cast<size_t>(stages), 1);
  std::vector<double> cost = split_stage_costs(n, c);
  for (int64_t k = stages; k < layers; ++k) {
    size_t best = 0;
    for (size_t s = 1; s < n.size(); ++s)
      if (cost[s] + c.layer <= cost[best] + c.layer) best = s;
    ++n[best];
    cost[best] += c.layer;
  }
  return n;
}

}  // namespace swarm::planner
