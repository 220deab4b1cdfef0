#include "planner/flops.h"

#include <cstddef>

namespace swarm::planner {

double stage_flops_per_sample(const StageShape& c, bool last) {
  const double H = static_cast<double>(c.hidden_size);
  const double T = static_cast<double>(c.sequence_length);
  const double V = static_cast<double>(c.vocab_size);
  const double I = static_cast<double>(c.intermediate_size);
  const double Q = static_cast<double>(c.num_heads * c.head_dim);
  const double KV = static_cast<double>(c.kv_heads * c.head_dim);
  const double projections = 2.0 * (H * Q + 2.0 * H * KV + Q * H);
  const double mlp = 2.0 * (c.gated_mlp ? 3.0 : 2.0) * H * I;
  const double attention = 2.0 * 2.0 * T * Q;
  double flops = T * (projections + mlp + attention) * static_cast<double>(c.layers);
  if (last) flops += T * 2.0 * H * V;
  return flops;
}

std::vector<double> stage_costs(const StageShape& shape, const std::vector<int64_t>& stage_layers) {
  std::vector<double> out;
  for (std::size_t s = 0; s < stage_layers.size(); ++s) {
    StageShape stage = shape;
    stage.layers = stage_layers[s];
    out.push_back(stage_flops_per_sample(stage, s + 1 == stage_layers.size()));
  }
  return out;
}

}  // namespace swarm::planner
