#include "operator/controller/job_plan.h"

#include <map>
#include <string>

#include "operator/kube/time_format.h"

namespace swarm::op {
namespace {

using planner::PlacementInput;
using planner::PoolInfo;

// Placement's view of the job: its pools (availability carried over in status), its workers.
PlacementInput placement_input(const SwarmJob& job, const std::vector<PodView>& workers,
                               const std::map<std::string, PoolStatus>& old_pools, double now) {
  PlacementInput in;
  in.stages = static_cast<int>(job.spec.pipeline.stages);
  in.per_stage = static_cast<int>(job.spec.workers.per_stage);
  in.max_per_stage = effective_max_per_stage(job);
  in.min_per_stage = job.op.min_per_stage;
  in.now = now;
  in.unschedulable_seconds = job.op.unschedulable_seconds;
  in.retry_pool_seconds = job.op.retry_pool_seconds;
  if (job.op.pools.empty()) {
    in.pools.push_back({"", 0, -1, 0, 0, false});
  } else {
    for (const auto& p : job.op.pools) {
      PoolInfo info{p.name, p.priority, p.max_workers, 0, 0, p.autoscaled};
      auto it = old_pools.find(p.name);
      if (it != old_pools.end() && !it->second.available) {
        info.unavailable_until = kube::to_seconds(it->second.retry_at);
        info.unavailable_since = kube::to_seconds(it->second.unavailable_since);
      }
      in.pools.push_back(info);
    }
  }
  for (const auto& w : workers)
    in.workers.push_back({w.name, w.stage, w.pool, w.slot, w.state, w.unschedulable_since, w.terminating, w.notice, w.node});
  return in;
}

}  // namespace

JobPlan plan_job(const SwarmJob& job, const std::vector<PodView>& workers,
                 const std::optional<planner::ClusterCapacity>& capacity, const SwarmJobStatus& status, double now,
                 std::vector<int> stage_targets) {
  std::map<std::string, PoolStatus> old_pools;
  for (const auto& p : status.pools) old_pools[p.name] = p;
  JobPlan out;
  out.in = placement_input(job, workers, old_pools, now);
  out.in.stage_targets = std::move(stage_targets);
  if (capacity) out.in.capacity = capacity->nodes;
  out.plan = planner::plan_workers(out.in);
  return out;
}

}  // namespace swarm::op
