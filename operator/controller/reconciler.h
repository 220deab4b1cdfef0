// Reconciler: brings one SwarmJob's world to its desired state. Level-based and idempotent: it
// reads the job, its pods and the nodes from the caches, asks the placement planner what should
// change, applies the difference (pods created under deterministic names, so a repeat is a 409,
// never a duplicate), and writes status through /status only when it changed. It keeps no state
// that a restart would lose: counters and pool overflow live in the job's status.
#pragma once

#include <string>

#include "operator/api/status.h"
#include "operator/api/swarmjob.h"
#include "operator/controller/metrics.h"
#include "operator/controller/progress_poller.h"
#include "operator/controller/world.h"
#include "operator/kube/client.h"
#include "operator/kube/events.h"
#include "planner/capacity.h"
#include "planner/placement.h"

namespace swarm::op {

struct PodView;  // reconciler.cc

struct ReconcileResult {
  double requeue_after_seconds = 0;  // 0 = only on change (plus the periodic resync)
};

class Reconciler {
 public:
  Reconciler(kube::Client& client, kube::EventRecorder& events, OperatorMetrics& metrics, World& world)
      : client_(client), events_(events), metrics_(metrics), world_(world) {}

  // Job progress read from the registries (may be null: status keeps its figures as they are).
  void set_progress_source(const ProgressPoller* poller) { progress_ = poller; }

  // Throws on API errors; the caller requeues with backoff.
  ReconcileResult reconcile(const std::string& key);

 private:
  void cleanup_deleted(const std::string& ns, const std::string& name);
  void ensure_support_objects(const SwarmJob& job);
  void ensure(const std::string& collection, const std::string& name, const kube::json& manifest,
              bool update_if_different);
  void write_status(const kube::json& job_obj, const SwarmJobStatus& status);
  void apply_registry_reading(const SwarmJob& job, const std::string& key, SwarmJobStatus& status,
                              const std::string& now_s);
  void record(const SwarmJob& job, const std::string& type, const std::string& reason, const std::string& msg);
  // Observe: capacity of the job's pools from the node and pod caches (nullopt until synced).
  std::optional<planner::ClusterCapacity> observe_capacity(const SwarmJob& job);
  // Apply: the plan's deletions, creations (each Event says why there), pool changes.
  void apply_plan(const SwarmJob& job, const std::string& key, const planner::PlacementPlan& plan,
                  const std::map<std::string, const PodView*>& by_name, const std::vector<std::string>& avoid_nodes,
                  const std::string& capacity_text, SwarmJobStatus& status, std::map<std::string, PoolStatus>& pools,
                  const std::string& now_s);
  // Trainers and the registry: fixed counts, replaced when their node goes.
  void keep_singletons(const SwarmJob& job, std::vector<PodView>& pods, int desired, const std::string& role,
                       const std::vector<std::string>& avoid_nodes);
  // Derive status: stages, pools (with capacity), phase and conditions; returns the worker counts
  // for the metrics.
  std::map<OperatorMetrics::WorkerKey, int> derive_status(const SwarmJob& job, const planner::PlacementInput& in, const planner::PlacementPlan& plan,
                     const std::vector<PodView>& workers, const std::vector<PodView>& trainers,
                     const planner::ClusterCapacity* capacity, std::map<std::string, PoolStatus>& old_pools,
                     SwarmJobStatus& status, const std::string& now_s);

  kube::Client& client_;
  kube::EventRecorder& events_;
  OperatorMetrics& metrics_;
  World& world_;
  const ProgressPoller* progress_ = nullptr;
  std::mutex mu_;
  std::map<std::string, std::string> ensured_;
  // job uid -> "generation" whose support objects exist
};

}  // namespace swarm::op
