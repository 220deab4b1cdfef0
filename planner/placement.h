// Placement: which workers a swarm should have, in which node pool, and which must go. Pure: no
// I/O, no Kubernetes, the clock is passed in as `now` (seconds since the epoch). The operator
// turns Kubernetes objects into PlacementInput (operator/controller/reconciler.cc) and a plan into
// pod creations and deletions; anything else that places workers in pools can use it as is.
//
// Rules, applied in this order on every reconcile (level-based: the same world gives the same
// plan, and applying a plan twice changes nothing):
//  1. A worker with a notice (reclaim, node lost, failed) is deleted: with its grace period for a
//     reclaim notice (the worker hands off its stage), at once when the node is already lost.
//  2. A worker unschedulable for unschedulable_seconds marks its pool unavailable until
//     now + retry_pool_seconds and is deleted (with the pool's other unschedulable workers);
//     its replacement goes to the next pool by priority. A pool whose retry time has come is
//     available again.
//  3. A stage with more ready workers than perStage drops the surplus from its least preferred
//     pools (a finished move-back); non-ready extras above maxPerStage go too.
//  4. Missing workers are created, emptiest stage first, each in the most preferred available
//     pool with room (higher priority first; equal priorities share: fewest workers first).
//  5. If a stage is still empty (no room anywhere) a worker of the fullest stage (if it has more
//     than one) is reassigned to it: deleted and recreated there. No stage is left empty while
//     another has a spare worker.
//  6. When all is settled, one worker in a less preferred pool is moved back to a more preferred
//     available pool with room: a surge pod is created there; rule 3 retires the old one once the
//     new one is ready.
// Capacity (PlacementInput::capacity, from planner/capacity.h; absent = unknown, every pool has
// room up to maxWorkers): a worker not yet bound to a node takes a free slot of its pool; one that
// finds none waits (for an autoscaled pool to grow) or is stranded. Then:
//  2b. A stranded worker (Unschedulable, in a pool that is not autoscaled and has no free slot) is
//      deleted at once (NoCapacity) when another pool has a free slot, and replaced there (rule 4):
//      no unschedulableSeconds wait for a pool that cannot grow.
//  4'. New workers go to the most preferred available pool that can take them now: one with a
//      free slot, or an autoscaled one (its pending pod asks the autoscaler for a node). With no
//      room anywhere none is created (it would compete for the next free slot with the stages
//      that need it more); the next node or pod event plans again.
//  4b. A stage with fewer than minPerStage serving workers (bound, or holding a free slot) gets a
//      surge worker (up to maxPerStage) from a pool with a free slot; rule 3 retires it once the
//      preferred pool's worker is ready.
//  5'. A stage with no serving worker and no free slot anywhere takes a ready worker of the stage
//      with the most serving ones (at least two): deleted, and the stage's worker placed in the
//      slot it frees, in the same pass. The slots of terminating workers count as free (soon).
//  6'. Move-backs go only to a pool with a free slot.
// Every creation carries `why`: the pools passed over (no free slot, full, unavailable) and the
// slots of the chosen one.
// Slots: every worker has a slot number (its pod name is <job>-w-<slot>); new workers take the
// lowest slots no existing pod (terminating ones included) holds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/capacity.h"

namespace swarm::planner {

// Why a worker must go: a reclaim notice (spot termination, node drain...), a lost node or a failed
// pod. The operator reads these from Kubernetes (operator/controller/reclaim.h).
struct Notice {
  std::string reason;
  int grace_seconds = 30;  // time left to hand off; 0 when lost
  bool lost = false;
};

struct PoolInfo {
  std::string name;      // "" = the implicit whole-cluster pool (no nodePools given)
  int priority = 0;
  int max_workers = -1;  // -1 = no limit
  double unavailable_until = 0;  // > now: overflowed, not used for new pods
  double unavailable_since = 0;
  bool autoscaled = false;  // a cluster autoscaler / Karpenter adds nodes on demand: worth waiting for
};

enum class WorkerState { Pending, Unschedulable, Running, Ready };

struct WorkerInfo {
  std::string name;
  int stage = 0;
  std::string pool;
  int slot = 0;
  WorkerState state = WorkerState::Pending;
  double unschedulable_since = 0;  // when state == Unschedulable
  bool terminating = false;         // deletionTimestamp set: already on its way out
  std::optional<Notice> notice;     // reclaim / lost / failed
  std::string node;
};

struct PlacementInput {
  int stages = 2;
  int per_stage = 1;
  int max_per_stage = 2;
  std::vector<PoolInfo> pools;  // at least one
  std::vector<WorkerInfo> workers;
  double now = 0;
  double unschedulable_seconds = 60;
  double retry_pool_seconds = 300;
  int min_per_stage = 1;
  // Usable nodes, their free worker slots and the pools that admit them (cluster_capacity().nodes);
  // nullopt = unknown: every pool has room up to its maxWorkers.
  std::optional<std::vector<NodeSlots>> capacity;
  // Empty: every stage wants per_stage workers and may surge to max_per_stage. Else one entry per
  // stage: the workers a quota admitted for it (the operator's Kueue integration), which the stage
  // both wants and never exceeds (no surge, no move-back beyond it; a reclaimed worker is still
  // replaced, its terminating pod no longer counting).
  std::vector<int> stage_targets;
};

// The workers stage `stage` wants: stage_targets[stage], else per_stage.
int desired_workers(const PlacementInput& in, int stage);
// The most workers stage `stage` may have at once: stage_targets[stage], else max_per_stage.
int most_workers(const PlacementInput& in, int stage);

struct CreateWorker {
  int slot = 0;
  int stage = 0;
  std::string pool;
  std::string reason;  // Initial | ScaleUp | Replacement | Overflow | Surge | Reassigned | MoveBack
  std::string replaces;  // the worker this one replaces, if any
  std::string why;       // why this pool: the pools passed over and the chosen one's free slots
  bool waits = false;    // no free slot for it now (an autoscaled pool must grow, or none has room)
};

struct DeleteWorker {
  std::string name;
  int grace_seconds = 0;
  std::string reason;  // the notice reason | Unschedulable | NoCapacity | Surplus | MovedBack | Reassigned
  std::string pool;
  int stage = 0;
  bool preemption = false;  // counts as a preemption (notice of any kind but PodFailed)
};

struct PoolChange {
  std::string pool;
  bool available = true;
  double until = 0;  // when unavailable: retry time
  std::string reason;
};

struct PlacementPlan {
  std::vector<DeleteWorker> deletes;
  std::vector<CreateWorker> creates;
  std::vector<PoolChange> pool_changes;
  int reassignments = 0;
  double requeue_at = 0;  // 0 = no deadline pending; else reconcile again at this time
};

PlacementPlan plan_workers(const PlacementInput& in);

const char* to_string(WorkerState s);

}  // namespace swarm::planner
