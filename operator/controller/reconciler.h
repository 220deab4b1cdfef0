// Reconciler: brings one SwarmJob's world to its desired state. Level-based and idempotent: it
// reads the job, its pods and the nodes from the caches, asks the placement planner what should
// change, applies the difference (pods created under deterministic names, so a repeat is a 409,
// never a duplicate), and writes status through /status only when it changed. It keeps no state
// that a restart would lose: counters and pool overflow live in the job's status.
// One reconcile: observe (caches) -> plan (pure, placement) -> apply (API writes) -> derive
// status (pure, job_status.h) -> publish (Events, metrics, the /status write).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "operator/api/status.h"
#include "operator/api/swarmjob.h"
#include "operator/controller/job_status.h"
#include "operator/controller/manifests.h"
#include "operator/controller/metrics.h"
#include "operator/controller/progress_poller.h"
#include "operator/controller/world.h"
#include "operator/kube/client.h"
#include "operator/kube/events.h"
#include "planner/capacity.h"
#include "planner/placement.h"

namespace swarm::op {

struct ReconcileResult {
  double requeue_after_seconds = 0;  // 0 = only on change (plus the periodic resync)
};

class Reconciler {
 public:
  Reconciler(kube::Client& client, kube::EventRecorder& events, OperatorMetrics& metrics, World& world)
      : client_(client), events_(events), metrics_(metrics), world_(world) {}

  // Job progress read from the registries (may be null: status keeps its figures as they are).
  void set_progress_source(const ProgressPoller* poller) { progress_ = poller; }
  // Each job gets a NetworkPolicy (manifests.h) with these options; nullopt (the default): the
  // reconciler neither makes nor deletes NetworkPolicies. Set before the first reconcile.
  void set_network_policy(std::optional<NetworkPolicyOptions> options) { network_policy_ = std::move(options); }

  // Throws on API errors; the caller requeues with backoff.
  ReconcileResult reconcile(const std::string& key);

 private:
  // What a reconcile observes of one job: its pods by role, the nodes to avoid (under a notice,
  // or holding one of its workers under one), the capacity of its pools (nullopt until synced).
  struct Observation {
    std::vector<PodView> workers, trainers, registries;
    std::vector<std::string> avoid_nodes;
    std::optional<planner::ClusterCapacity> capacity;
  };

  void cleanup_deleted(const std::string& ns, const std::string& name);
  void ensure_support_objects(const SwarmJob& job) EXCLUDES(mu_);
  // Creates the object unless it exists; with update_if_different, an existing one whose `data`
  // (ConfigMap) or `spec` (NetworkPolicy) differs from the manifest's is patched to it.
  void ensure(const std::string& collection, const std::string& name, const kube::json& manifest,
              bool update_if_different);
  void write_status(const kube::json& job_obj, const SwarmJobStatus& status);
  void record(const SwarmJob& job, const std::string& type, const std::string& reason, const std::string& msg);
  // The job's spec, or nullopt when it does not parse (status Failed/InvalidSpec written, Event).
  std::optional<SwarmJob> parse_or_fail(const kube::json& obj, const SwarmJobStatus& status, const std::string& now_s);
  // Observe: the job's pods, the nodes with a notice, the pools' capacity.
  Observation observe(const SwarmJob& job);
  std::optional<planner::ClusterCapacity> observe_capacity(const SwarmJob& job);
  // Apply: the plan's deletions, creations (each Event says why there), pool changes.
  void apply_plan(const SwarmJob& job, const std::string& key, const planner::PlacementPlan& plan,
                  const Observation& seen);
  // Trainers and the registry: fixed counts, replaced when their node goes.
  void keep_singletons(const SwarmJob& job, const std::vector<PodView>& pods, int desired, const std::string& role,
                       const std::vector<std::string>& avoid_nodes);
  // The derived status (job_status.h) out: its Events, the metrics, the /status write.
  void publish(const SwarmJob& job, const std::string& key, const kube::json& obj, const DerivedStatus& d);

  kube::Client& client_;
  kube::EventRecorder& events_;
  OperatorMetrics& metrics_;
  World& world_;
  const ProgressPoller* progress_ = nullptr;
  std::optional<NetworkPolicyOptions> network_policy_;
  swarm::Mutex mu_;
  std::map<std::string, std::string> ensured_ GUARDED_BY(mu_);  // job uid -> "generation" whose support objects exist
};

}  // namespace swarm::op
