// Plan: the pure step of a reconcile between observe and apply. From the job, its observed workers,
// the pools' capacity and the pools' availability as status carries it, placement's input and the
// plan placement answers (planner/placement.h).
#pragma once

#include <optional>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/swarmjob.h"
#include "operator/controller/job_status.h"
#include "planner/capacity.h"
#include "planner/placement.h"

namespace swarm::op {

// What placement is asked (`in`) and what it answers.
struct JobPlan {
  planner::PlacementInput in;
  planner::PlacementPlan plan;
};

// `stage_targets` (empty: perStage and maxPerStage as the spec says): the workers each stage may
// have, when a quota decides (Kueue's admission).
JobPlan plan_job(const SwarmJob& job, const std::vector<PodView>& workers,
                 const std::optional<planner::ClusterCapacity>& capacity, const SwarmJobStatus& status, double now,
                 std::vector<int> stage_targets = {});

}  // namespace swarm::op
