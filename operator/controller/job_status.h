// Derive status: the last step of a reconcile (observe -> plan -> apply -> derive status), pure.
// From what the reconcile observed (the job's pods, the pools' capacity, the registry's latest
// reading), the plan it applied and the job, it computes the next .status, the worker counts for
// the metrics and the Events that status changes call for. No I/O, no clock (`now` is passed in).
//
// What it sets:
//   counters       preemptions (+1 per preemption delete, lastPreemptionTime = now),
//                  stageReassignments (+ the plan's reassignments)
//   pools          the plan's pool changes (available, reason, unavailableSince, retryAt), then per
//                  pool: workers/ready/unschedulable recounted, capacity from the node cache
//   stages         ready/pending/desired recounted; the registry's figures carried over
//   phase          Running when every stage has spec.workers.minPerStage ready workers; else
//                  Degraded when it was Running or Degraded, else Pending; Failed while the
//                  registry reports a failure (condition Failed=True)
//   conditions     SpecValid  True/Valid
//                  Ready      True/AllStagesServed | False/StagesUnderServed
//                  Degraded   True/StageBelowMinimum (phase Degraded) | False/AsExpected
//                  PoolOverflow True/PoolUnschedulable (a pool unavailable) | False/AllPoolsAvailable
//                  Failed     (from a registry reading, progress.h apply_failure)
//                  RegistryReachable True/RegistryRead | False/<reading's error reason>
//   exportedModel  from a Succeeded trainer's termination message {"exportedModel": LOCATION,
//   exportedStep   "step": N} (parse_model_export); kept once set, replaced by a higher step;
//                  a Normal Event ModelExported when it is set or replaced. A message that is not
//                  such JSON is ignored.
// invalid_spec_status: phase Failed, SpecValid False/InvalidSpec (nothing else changes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/swarmjob.h"
#include "operator/controller/progress.h"
#include "planner/capacity.h"
#include "planner/placement.h"

namespace swarm::op {

// One of the job's pods as the reconciler reads it.
struct PodView {
  std::string name, key, uid, role, node, pool;
  int slot = 0, stage = -1;
  planner::WorkerState state = planner::WorkerState::Pending;
  double unschedulable_since = 0;
  bool terminating = false, succeeded = false;
  std::optional<planner::Notice> notice;
  // The container's state.terminated.message ("" = none): trainer 0 writes where it exported the
  // model there.
  std::string termination_message;
};

// What trainer 0 reports in its termination message once it exported the model.
struct ModelExport {
  std::string location;  // a file path or an s3:// URL
  std::int64_t step = 0;
};

// `message` as {"exportedModel": "<location>", "step": <int >= 0>}; nullopt for anything else
// (not JSON, another shape, an empty location), never a throw.
std::optional<ModelExport> parse_model_export(const std::string& message);

// Workers by (pool, stage, phase), the phase being the WorkerState or "Terminating"
// (OperatorMetrics::WorkerKey).
using WorkerCounts = std::map<std::tuple<std::string, int, std::string>, int>;

struct StatusEvent {
  std::string type;  // Normal | Warning
  std::string reason, message;
};

// What derive_status reads. The references must outlive the call.
struct StatusInputs {
  const SwarmJob& job;
  const SwarmJobStatus& previous;       // .status as read from the object, before this reconcile
  const planner::PlacementInput& in;    // placement's view (stages, per stage, pools)
  const planner::PlacementPlan& plan;   // what was applied
  const std::vector<PodView>& workers;  // observed before the plan was applied
  const std::vector<PodView>& trainers;
  const planner::ClusterCapacity* capacity;  // null: not known yet
  const ProgressReading* reading;            // null: no reading (no poller, or not read yet)
  std::string now;                           // RFC 3339
};

struct DerivedStatus {
  SwarmJobStatus status;
  WorkerCounts workers;
  // A failure the registry reported that this reading made the job fail by (log it, count it).
  std::optional<JobFailure> new_failure;
  // To record, in order: the new failure, the registry becoming (un)reachable, the phase change,
  // a model exported.
  std::vector<StatusEvent> events;
};

DerivedStatus derive_status(const StatusInputs& inputs);

// The status of a job whose spec does not parse: `message` = the errors joined by "; ".
SwarmJobStatus invalid_spec_status(SwarmJobStatus previous, std::int64_t generation, const std::string& message,
                                   const std::string& now);

}  // namespace swarm::op
