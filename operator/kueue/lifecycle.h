// A Kueue-managed SwarmJob's life, as one pure decision per reconcile: from the job, its Workloads,
// the flavors and its pods, what to write to the Workloads, whether the job is suspended, and what
// its pods may do. Level-based and idempotent: everything it needs is in those objects (no memory of
// earlier passes), so an operator killed at any point and restarted completes what was under way.
//
//   no core Workload       create it (with the priority of the job's WorkloadPriorityClass);
//                          spec.suspend = true, phase Queued
//   core waiting           phase Queued, condition Queued=True naming the LocalQueue and quoting
//                          Kueue's reason (QuotaReserved's message); no pods
//   core admitted          spec.suspend = false; run the envelope (admission.h); make the extension
//                          Workloads (pinned to the core workers' flavor); give back an evicted
//                          extension's quota once the workers beyond the core's are gone; refuse
//                          (deactivate) an extension admitted on another flavor
//   core evicted           phase Draining, spec.suspend = true; the pods drain in order (below);
//                          only when none is left (terminating ones included) is the admission
//                          cleared (workload.h clear_admission_patch) and the extensions deleted:
//                          quota is never given back while a pod of the job still runs
//   training ended         the pods drain; then Finished=True on every Workload and the finalizers
//                          go; phase Finished (or Failed)
//   stale Workloads        (owned by an earlier job of the same name) released and deleted
//
// The drain: trainers first (no new microbatch: every stage stops at the same step), then the
// workers (SIGTERM: each hands its gradient off; the last peer of a stage writes its checkpoint at
// that step, worker/stage/membership.cc), then the registry (the workers needed it to hand off).
// Each step waits until the pods of the one before have exited.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/swarmjob.h"
#include "operator/kueue/admission.h"
#include "operator/kueue/workload.h"

namespace swarm::op::kueue {

// The job's pods by role: `*_alive` not terminating (succeeded trainers excluded: they hold
// nothing), `*_terminating` on their way out.
struct PodCounts {
  int trainers_alive = 0, trainers_terminating = 0;
  int workers_alive = 0, workers_terminating = 0;
  int registries_alive = 0, registries_terminating = 0;
  std::vector<int> workers_by_stage;  // every worker pod, terminating included, by its stage label
  int total() const {
    return trainers_alive + trainers_terminating + workers_alive + workers_terminating + registries_alive +
           registries_terminating;
  }
};

enum class DrainStep { StopTrainers, WaitTrainers, DrainWorkers, WaitWorkers, StopRegistry, WaitRegistry, Done };
DrainStep drain_step(const PodCounts& pods);
std::string describe(DrainStep step, const PodCounts& pods);

struct Inputs {
  const SwarmJob& job;
  const JobTemplates& templates;
  std::optional<Priority> priority;       // the job's WorkloadPriorityClass, resolved
  std::string priority_problem;           // the class is named but cannot be read: no Workload yet
  std::vector<WorkloadView> workloads;    // every Workload labelled with the job's name
  std::map<std::string, Flavor> flavors;  // ResourceFlavors by name
  PodCounts pods;
  bool ended = false;      // the training is over: every trainer Succeeded, or the job Failed
  bool succeeded = false;  // ... and it succeeded
  std::optional<QueueStatus> previous;  // status.queue as read
  std::string now;                      // RFC 3339
};

struct WorkloadWrite {
  enum class Kind { Create, PatchSpec, PatchStatus, Release, Delete } kind;
  std::string name;
  json body;  // the manifest (Create) or the merge patch; empty for Delete
};

struct Event {
  std::string type, reason, message;
};

struct Decision {
  std::vector<WorkloadWrite> writes;  // in order
  std::optional<bool> suspend;        // write spec.suspend
  bool run = false;                   // pods inside `envelope`; else none are made
  std::optional<Envelope> envelope;
  DrainStep drain = DrainStep::Done;  // when !run: what to stop now
  std::string phase;                  // Queued | Draining | Finished; "" = as the pods say
  Condition queued;                   // the job's condition Queued
  QueueStatus queue;
  std::vector<Event> events;
};

Decision decide(const Inputs& in);

// The job is gone: release and delete its Workloads.
std::vector<WorkloadWrite> release_all(const std::vector<WorkloadView>& workloads);

}  // namespace swarm::op::kueue
