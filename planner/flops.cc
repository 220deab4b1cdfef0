#include "planner/flops.h"

namespace swarm::planner {

double stage_flops_per_sample(const StageShape& c, bool last) {
  const double H = static_cast<double>(c.hidden_size);
  const double T = static_cast<double>(c.sequence_length);
  const double V = static_cast<double>(c.vocab_size);
  const double M = static_cast<double>(c.mlp_ratio) * H;
  const double per_token_layer = 2.0 * (3.0 * H * H + H * H + 2.0 * H * M) + 2.0 * 2.0 * T * H;
  double flops = T * per_token_layer * static_cast<double>(c.layers_per_stage);
  if (last) flops += T * 2.0 * H * V;
  return flops;
}

std::vector<double> stage_costs(const StageShape& shape, int64_t stages) {
  std::vector<double> out;
  for (int64_t s = 0; s < stages; ++s) out.push_back(stage_flops_per_sample(shape, s + 1 == stages));
  return out;
}

}  // namespace swarm::planner
