// Controller: the wiring around the Reconciler. Informers on SwarmJobs, our pods (by the
// managed-by label) and Nodes feed one rate-limited work queue of job keys; `workers` threads take
// keys and reconcile them, requeueing with per-key exponential backoff on failure and after the
// planner's deadlines. Node and pod reclaim notices enqueue the affected jobs at once (front of
// the line: no backoff), which is what makes notice -> replacement fast.
//
// The ProgressPoller reads running jobs' registries while leading and enqueues a job whose
// figures changed; the reconcile writes them into status.
//
// Informers run from start(); keys are processed only while lead() is in effect, so a standby
// replica has warm caches and takes over within one lease retry period.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/job_secrets.h"
#include "operator/controller/kueue_sync.h"
#include "operator/controller/metrics.h"
#include "operator/controller/progress_poller.h"
#include "operator/controller/reconciler.h"
#include "operator/controller/world.h"
#include "operator/kube/client.h"
#include "operator/kube/events.h"
#include "operator/kube/informer.h"
#include "operator/kube/retry.h"
#include "operator/kube/work_queue.h"

namespace swarm::op {

struct ControllerOptions {
  std::string namespace_;       // "" = all namespaces
  int workers = 4;              // reconcile threads
  double resync_seconds = 300;  // every job is reconciled at least this often
  // Job progress from each running job's registry; period_seconds <= 0 turns it off.
  ProgressPollerOptions progress;
  // A NetworkPolicy per job (manifests.h); off: the operator does not touch NetworkPolicies.
  bool network_policies = false;
  NetworkPolicyOptions network_policy;
  // Kueue (--kueue): jobs labelled kueue.x-k8s.io/queue-name run through Workloads (kueue_sync.h);
  // off: no Kueue object is watched or touched and the label is ignored.
  bool kueue = false;
  std::string kueue_default_queue;  // the LocalQueue of jobs without the label ("" = not queued)
};

class Controller {
 public:
  Controller(kube::Client& client, kube::EventRecorder& events, OperatorMetrics& metrics, ControllerOptions options);
  ~Controller();

  void start();                        // informers
  bool wait_synced(std::chrono::milliseconds timeout);
  void lead();                         // start reconciling
  void stop();

  kube::WorkQueue& queue() { return queue_; }
  const kube::Informer& pods() const { return *pods_; }

 private:
  void on_job(kube::EventType t, const kube::json& obj);
  void on_pod(kube::EventType t, const kube::json& obj, const kube::json* old);
  void on_node(kube::EventType t, const kube::json& obj, const kube::json* old);
  void setup_kueue();
  std::vector<kube::Informer*> informers() const;
  void work();
  std::vector<ProgressTarget> progress_targets() const;

  kube::Client& client_;
  OperatorMetrics& metrics_;
  ControllerOptions options_;
  std::unique_ptr<kube::Informer> jobs_, pods_, nodes_;
  std::unique_ptr<kube::Informer> bound_pods_;  // every bound pod in the cluster: node capacity
  // With options.kueue: our Workloads, the ResourceFlavors and WorkloadPriorityClasses.
  std::unique_ptr<kube::Informer> workloads_, flavors_, priority_classes_;
  std::unique_ptr<KueueSync> kueue_;
  std::unique_ptr<World> world_;
  std::unique_ptr<Reconciler> reconciler_;
  std::unique_ptr<ProgressPoller> progress_;
  std::unique_ptr<JobSecrets> secrets_;  // for progress_: each job's secret signs its registry reads
  // A failed reconcile (the API server away, a conflict) is retried after 5 ms doubling, capped at
  // 5 s (kube::kRetryCapSeconds, as the informers): the operator acts again within seconds of the
  // API server coming back, not after a minute of backoff (issue 29).
  kube::WorkQueue queue_{std::chrono::milliseconds(5),
                         std::chrono::milliseconds(static_cast<long long>(kube::kRetryCapSeconds * 1000))};
  std::vector<std::thread> threads_;
  std::thread stats_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> leading_{false};
};

}  // namespace swarm::op
