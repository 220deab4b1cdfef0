#include "operator/controller/metrics.h"

#include <prometheus/text_serializer.h>

#include "common/metrics_endpoint.h"

namespace swarm::op {

OperatorMetrics::OperatorMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  using namespace prometheus;
  reconciles_ = &BuildCounter().Name("swarm_operator_reconciles_total").Help("Reconciles by result").Register(*registry_);
  Histogram::BucketBoundaries secs;
  for (double v = 0.001; v < 70; v *= 2) secs.push_back(v);
  reconcile_duration_ = &BuildHistogram().Name("swarm_operator_reconcile_duration_seconds")
                             .Help("Duration of one reconcile").Register(*registry_).Add({}, secs);
  reconcile_errors_ = &BuildCounter().Name("swarm_operator_reconcile_errors_total")
                           .Help("Reconciles that failed and were requeued with backoff").Register(*registry_).Add({});
  queue_depth_ = &BuildGauge().Name("swarm_operator_workqueue_depth").Help("Keys waiting in the work queue")
                      .Register(*registry_).Add({});
  leader_ = &BuildGauge().Name("swarm_operator_is_leader").Help("1 while this replica leads").Register(*registry_).Add({});
  jobs_ = &BuildGauge().Name("swarm_operator_jobs").Help("SwarmJobs by phase").Register(*registry_);
  workers_ = &BuildGauge().Name("swarm_operator_workers").Help("Worker pods by pool, stage and phase").Register(*registry_);
  preemptions_ = &BuildCounter().Name("swarm_operator_preemptions_total")
                      .Help("Workers lost to reclaim notices and dead nodes, by pool and reason").Register(*registry_);
  reassignments_ = &BuildCounter().Name("swarm_operator_stage_reassignments_total")
                        .Help("Workers moved to another stage so no stage is empty").Register(*registry_).Add({});
  Histogram::BucketBoundaries fast = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30};
  reclaim_latency_ = &BuildHistogram().Name("swarm_operator_reclaim_to_replacement_seconds")
                          .Help("Seconds from a reclaim notice seen to its replacement pod created")
                          .Register(*registry_).Add({}, fast);
  api_requests_ = &BuildCounter().Name("swarm_operator_api_requests_total").Help("Kubernetes API requests by verb")
                       .Register(*registry_);
  relists_ = &BuildGauge().Name("swarm_operator_watch_relists_total")
                  .Help("Full lists per watched resource (first sync and every 410 Gone)").Register(*registry_);
  registry_reads_ = &BuildCounter().Name("swarm_operator_registry_reads_total")
                         .Help("Reads of job registries (progress) by result").Register(*registry_);
  job_failures_ = &BuildCounter().Name("swarm_operator_job_failures_total")
                       .Help("Jobs that turned Failed on a failure their registry reported, by reason").Register(*registry_);
}

OperatorMetrics::~OperatorMetrics() = default;

void OperatorMetrics::serve(const std::string& host, int port) {
  if (port <= 0) return;
  endpoint_ = std::make_unique<http::MetricsEndpoint>(
      host, port, [this] { return exposition(); }, [](const std::string& path) -> std::optional<http::Response> {
        if (path == "/healthz" || path == "/readyz") return http::Response{200, "ok\n"};
        return std::nullopt;
      });
}

std::string OperatorMetrics::exposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void OperatorMetrics::observe_reconcile(double seconds, bool ok) {
  reconciles_->Add({{"result", ok ? "ok" : "error"}}).Increment();
  reconcile_duration_->Observe(seconds);
  if (!ok) reconcile_errors_->Increment();
}

void OperatorMetrics::set_queue_depth(double d) { queue_depth_->Set(d); }
void OperatorMetrics::set_leader(bool l) { leader_->Set(l ? 1 : 0); }
void OperatorMetrics::add_preemption(const std::string& pool, const std::string& reason) {
  preemptions_->Add({{"pool", pool}, {"reason", reason}}).Increment();
}
void OperatorMetrics::add_reassignments(int n) {
  if (n > 0) reassignments_->Increment(n);
}
void OperatorMetrics::observe_reclaim_to_replacement(double s) { reclaim_latency_->Observe(s); }
void OperatorMetrics::add_api_request(const std::string& verb) { api_requests_->Add({{"verb", verb}}).Increment(); }
void OperatorMetrics::add_registry_read(const std::string& result) {
  registry_reads_->Add({{"result", result}}).Increment();
}
void OperatorMetrics::add_job_failure(const std::string& reason) { job_failures_->Add({{"reason", reason}}).Increment(); }
void OperatorMetrics::set_relists(const std::string& resource, double total) {
  relists_->Add({{"resource", resource}}).Set(total);
}

void OperatorMetrics::set_job(const std::string& key, const std::string& phase, const std::map<WorkerKey, int>& w) {
  swarm::MutexLock lock(mu_);
  job_phase_[key] = phase;
  job_workers_[key] = w;
  refresh_locked();
}

void OperatorMetrics::forget_job(const std::string& key) {
  swarm::MutexLock lock(mu_);
  job_phase_.erase(key);
  job_workers_.erase(key);
  refresh_locked();
}

void OperatorMetrics::refresh_locked() {
  std::map<std::string, int> phases = {{"Pending", 0}, {"Running", 0}, {"Degraded", 0}, {"Failed", 0}};
  for (auto& [k, p] : job_phase_) ++phases[p];
  for (auto& [p, n] : phases) {
    auto& g = phase_gauges_[p];
    if (!g) g = &jobs_->Add({{"phase", p}});
    g->Set(n);
  }
  std::map<WorkerKey, int> sums;
  for (auto& [k, w] : job_workers_)
    for (auto& [wk, n] : w) sums[wk] += n;
  for (auto& [wk, g] : worker_gauges_)
    if (!sums.count(wk)) g->Set(0);
  for (auto& [wk, n] : sums) {
    auto& g = worker_gauges_[wk];
    if (!g) g = &workers_->Add({{"pool", std::get<0>(wk)}, {"stage", std::to_string(std::get<1>(wk))}, {"phase", std::get<2>(wk)}});
    g->Set(n);
  }
}

}  // namespace swarm::op
