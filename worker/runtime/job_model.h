// Maps the job spec onto the model library's own configuration types (worker/model does not
// know about the job spec, so it can be built alone against any libtorch).
#pragma once

#include <vector>

#include "common/job_spec.h"
#include "planner/flops.h"
#include "worker/model/config.h"
#include "worker/model/optimizer.h"

namespace swarm::runtime {

model::ModelConfig model_config(const JobSpec& spec);
model::OptimizerConfig optimizer_config(const JobSpec& spec);

// Seed of stage `stage`'s initial parameters: every peer of a stage derives the same one.
uint64_t stage_seed(const JobSpec& spec);

// The shape planner/flops.h costs (its `layers` left at the default: set it per stage).
planner::StageShape stage_shape(const model::ModelConfig& config);

// Relative compute cost per sample of each stage (forward FLOPs, planner/flops.h), for the
// rebalancer's estimate of a moved peer's speed on its new stage.
std::vector<double> stage_costs(const JobSpec& spec);

}  // namespace swarm::runtime
