// The operator's Prometheus metrics, served on /metrics (and /healthz, /readyz) by the project's
// HTTP server (common/http_server.h: bodies bounded while read; GET and HEAD only). Names:
//   swarm_operator_reconciles_total{result}             ok | error
//   swarm_operator_reconcile_duration_seconds           histogram
//   swarm_operator_reconcile_errors_total
//   swarm_operator_workqueue_depth
//   swarm_operator_jobs{phase}
//   swarm_operator_workers{pool,stage,phase}            over all jobs
//   swarm_operator_preemptions_total{pool,reason}
//   swarm_operator_stage_reassignments_total
//   swarm_operator_reclaim_to_replacement_seconds       histogram: notice seen -> replacement created
//   swarm_operator_api_requests_total{verb}
//   swarm_operator_watch_relists_total{resource}
//   swarm_operator_is_leader
//   swarm_operator_registry_reads_total{result}       ok | RegistryUnreachable | RegistryBadReply |
//                                                      RegistryUnauthorized | RegistrySecretUnreadable
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "common/thread_annotations.h"

namespace swarm::http {
class MetricsEndpoint;
}

namespace swarm::op {

class OperatorMetrics {
 public:
  OperatorMetrics();
  ~OperatorMetrics();

  // Serves /metrics on host:port (port 0 = no listener). Throws on a busy port.
  void serve(const std::string& host, int port);
  std::string exposition() const;

  void observe_reconcile(double seconds, bool ok);
  void set_queue_depth(double depth);
  void set_leader(bool leader);
  void add_preemption(const std::string& pool, const std::string& reason);
  void add_reassignments(int n);
  void observe_reclaim_to_replacement(double seconds);
  void add_api_request(const std::string& verb);
  void set_relists(const std::string& resource, double total);
  void add_registry_read(const std::string& result);
  void add_job_failure(const std::string& reason);

  // Per-job views; the exported gauges are the sums over jobs (a deleted job: forget_job).
  using WorkerKey = std::tuple<std::string, int, std::string>;  // pool, stage, phase
  void set_job(const std::string& job_key, const std::string& phase, const std::map<WorkerKey, int>& workers)
      EXCLUDES(mu_);
  void forget_job(const std::string& job_key) EXCLUDES(mu_);

 private:
  void refresh_locked() REQUIRES(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Family<prometheus::Counter>* job_failures_;
  prometheus::Histogram* reconcile_duration_;
  prometheus::Counter* reconcile_errors_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* leader_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* workers_;
  prometheus::Family<prometheus::Counter>* preemptions_;
  prometheus::Counter* reassignments_;
  prometheus::Histogram* reclaim_latency_;
  prometheus::Family<prometheus::Counter>* api_requests_;
  prometheus::Family<prometheus::Gauge>* relists_;
  prometheus::Family<prometheus::Counter>* registry_reads_;

  // mu_ guards the per-job views and the gauges made from them (the other metrics are
  // prometheus-cpp's own thread-safe objects).
  swarm::Mutex mu_;
  std::map<std::string, std::string> job_phase_ GUARDED_BY(mu_);
  std::map<std::string, std::map<WorkerKey, int>> job_workers_ GUARDED_BY(mu_);
  std::map<WorkerKey, prometheus::Gauge*> worker_gauges_ GUARDED_BY(mu_);
  std::map<std::string, prometheus::Gauge*> phase_gauges_ GUARDED_BY(mu_);
  std::unique_ptr<http::MetricsEndpoint> endpoint_;
};

}  // namespace swarm::op
