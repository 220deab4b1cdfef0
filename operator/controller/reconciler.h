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
#include "operator/controller/job_plan.h"
#include "operator/controller/job_status.h"
#include "operator/controller/kueue_sync.h"
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
  // The Kueue integration (--kueue): jobs labelled kueue.x-k8s.io/queue-name run only inside what
  // Kueue admitted (kueue_sync.h, operator/kueue/). Null (the default): the label is ignored. With
  // `default_queue`, a job without the label waits in that LocalQueue. Set before the first reconcile.
  void set_kueue(KueueSync* kueue, std::string default_queue = "") {
    kueue_ = kueue;
    kueue_default_queue_ = std::move(default_queue);
  }

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
  // Apply: the plan's deletions, creations (each Event says why there), pool changes. `overlay`:
  // what the admitted flavors add to every new pod (Kueue), null for none.
  void apply_plan(const SwarmJob& job, const std::string& key, const planner::PlacementPlan& plan,
                  const Observation& seen, const kueue::Overlay* overlay = nullptr);
  // Trainers and the registry: fixed counts, replaced when their node goes.
  void keep_singletons(const SwarmJob& job, const std::vector<PodView>& pods, int desired, const std::string& role,
                       const std::vector<std::string>& avoid_nodes, const kueue::Overlay* overlay = nullptr);
  // A job that is suspended or in a Kueue queue (reconciler_kueue.cc): Kueue's decision applied,
  // pods only inside its admission, the drain step by step when not admitted.
  bool queued_path(const SwarmJob& job) const;
  ReconcileResult reconcile_queued(const SwarmJob& job, const std::string& key, const kube::json& obj,
                                   const SwarmJobStatus& status, const Observation& seen, double now,
                                   const std::string& now_s);
  // Decides (kueue::decide, or the plain drain of a suspended job) and applies the Workload writes
  // and spec.suspend; false when a write was stale (decide again soon).
  bool decide_queued(const SwarmJob& job, const kube::json& obj, const SwarmJobStatus& status,
                     const Observation& seen, const std::string& now_s, kueue::Decision& d);
  // One drain step: the trainers, the workers or the registry deleted gracefully.
  void stop_pods(const SwarmJob& job, const Observation& seen, kueue::DrainStep step);
  // The derived status (job_status.h) out: its Events, the metrics, the /status write.
  void publish(const SwarmJob& job, const std::string& key, const kube::json& obj, const DerivedStatus& d);

  kube::Client& client_;
  kube::EventRecorder& events_;
  OperatorMetrics& metrics_;
  World& world_;
  const ProgressPoller* progress_ = nullptr;
  KueueSync* kueue_ = nullptr;
  std::string kueue_default_queue_;
  std::optional<NetworkPolicyOptions> network_policy_;
  swarm::Mutex mu_;
  std::map<std::string, std::string> ensured_ GUARDED_BY(mu_);  // job uid -> "generation" whose support objects exist
};

}  // namespace swarm::op
