// SwarmJob .status: what the operator reports (through the /status subresource) and what it needs
// back after a restart (preemption counters, pools in overflow). Everything else is rebuilt from
// the pods, so a restarted operator loses nothing.
#pragma once

#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace swarm::op {

using json = nlohmann::json;

struct Condition {
  std::string type;    // Ready | Degraded | SpecValid | PoolOverflow
  std::string status;  // "True" | "False" | "Unknown"
  std::string reason;  // CamelCase
  std::string message;
  std::string last_transition_time;
  std::int64_t observed_generation = 0;
};

struct StageStatus {
  int stage = 0, ready = 0, desired = 0, pending = 0;
  // From the job's registry (operator/controller/progress.h): steps the stage took, the capacity
  // (samples per compute-second) of its serving workers, their queued requests, live peers.
  double samples_per_second = 0;
  std::int64_t step = 0, queue_length = 0;
  int peers = 0;
};

struct PoolStatus {
  std::string name;
  int ready = 0, workers = 0, unschedulable = 0;
  bool available = true;
  std::string unavailable_since;  // RFC 3339; set while !available
  std::string retry_at;           // RFC 3339; when the pool is tried again
  std::string reason;
  // Capacity (planner/capacity.h), from the node and pod caches: nodes the pool admits, of those
  // under a reclaim notice / NotReady, cordoned or deleting; worker slots free now and taken.
  bool capacity_known = false;
  int nodes = 0, nodes_under_notice = 0, nodes_unavailable = 0, free_slots = 0, used_slots = 0;
};

// status.queue: a job admitted through Kueue (operator/kueue/): its queue, where it was admitted,
// and its evictions (counted once each: an eviction is known by its condition's time).
struct QueueStatus {
  std::string name;           // the LocalQueue (label kueue.x-k8s.io/queue-name)
  std::string cluster_queue;  // the ClusterQueue that admitted it ("" while waiting)
  std::vector<std::string> workloads;
  int admitted_workers = 0;
  std::string admission;      // what runs where: "workers 6 on spot; trainers 1 on on-demand; ..."
  std::int64_t evictions = 0;
  std::string last_eviction_reason, last_eviction_message, last_eviction_time;
  bool operator==(const QueueStatus& o) const {
    return name == o.name && cluster_queue == o.cluster_queue && workloads == o.workloads &&
           admitted_workers == o.admitted_workers && admission == o.admission && evictions == o.evictions &&
           last_eviction_reason == o.last_eviction_reason && last_eviction_message == o.last_eviction_message &&
           last_eviction_time == o.last_eviction_time;
  }
};

struct SwarmJobStatus {
  // Pending | Running | Degraded | Failed; with Kueue also Queued (waiting for admission), Draining
  // (evicted: its pods leaving) and Finished; Suspended (spec.suspend without Kueue).
  std::string phase = "Pending";
  std::int64_t observed_generation = 0;
  std::vector<Condition> conditions;
  int ready_workers = 0, desired_workers = 0, trainers_ready = 0;
  std::vector<StageStatus> stages;
  std::vector<PoolStatus> pools;
  std::int64_t step = 0;
  double samples_per_second = 0, loss = 0;
  std::int64_t preemptions = 0;
  std::string last_preemption_time;
  std::int64_t stage_reassignments = 0;
  std::vector<std::string> reclaimed_nodes;  // nodes with a notice that still hold our pods
  // From the job's registry: when the step last rose (RFC 3339), rebalancer moves, and the
  // events peers report (checkpoint restores, hand-offs, lost samples...).
  std::string last_step_time;
  // When the registry was last read (RFC 3339): the figures' age while RegistryReachable is False.
  std::string progress_read_time;
  std::int64_t rebalance_moves = 0;
  std::map<std::string, std::int64_t> swarm_events;
  // The model trainer 0 exported at the end of training (a file path or an s3:// URL) and the step
  // it was exported at, from the succeeded trainer pod's termination message; "" = none yet.
  std::string exported_model;
  std::int64_t exported_step = 0;
  std::optional<QueueStatus> queue;  // only for a job in a Kueue queue
};

json to_json(const SwarmJobStatus& s);
SwarmJobStatus status_from_json(const json& j);  // tolerant: missing fields take defaults

// Sets condition `c` in `conds`: lastTransitionTime changes only when status changes.
void set_condition(std::vector<Condition>& conds, Condition c, const std::string& now);
const Condition* find_condition(const std::vector<Condition>& conds, const std::string& type);

}  // namespace swarm::op
