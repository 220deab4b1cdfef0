// Prometheus metrics of one data-plane process (worker or trainer), served on /metrics.
// Names follow Prometheus conventions: `swarm_` prefix, `_total` counters, `_seconds` and
// `_bytes` units. One Metrics object per process; every method is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/thread_annotations.h"

namespace swarm::http {
class MetricsEndpoint;
}

namespace swarm::runtime {

class Metrics {
 public:
  // `bind` is "host:port"; port 0 picks a free port (see port()). `role` is "worker"/"trainer".
  Metrics(const std::string& bind, const std::string& role, const std::string& peer_id);
  ~Metrics();

  int port() const { return port_; }
  // GET /readyz answers 200 while `ready` returns true and 503 otherwise (always 503 before a
  // callback is set): a worker's readiness probe, true only while it serves its stage.
  void set_readiness(std::function<bool()> ready) EXCLUDES(readiness_mu_);
  bool ready() const EXCLUDES(readiness_mu_);
  // The current metrics in Prometheus' text exposition format (what GET /metrics returns).
  std::string exposition() const;

  // op: "forward", "backward", "forward_backward", "average".
  void observe_request(int stage, const std::string& op, double seconds, int64_t samples);
  void add_retry(int stage, const std::string& op);
  void add_failure(int stage, const std::string& op);
  void set_queue_length(int stage, double n);
  // swarm_stage_compute_seconds_total / swarm_stage_wait_seconds_total (a worker passes wait 0).
  void add_stage_time(int stage, double compute_seconds, double wait_seconds);
  void add_bytes(uint64_t sent, uint64_t received);
  void set_loss(double loss);
  void set_optimizer_step(int stage, double step);
  void set_peers(int stage, double n);
  void observe_averaging(int stage, double seconds, double group_size);
  void set_learning_rate(int stage, double lr);
  // This worker found its stage without state after the job trained (swarm_stage_reset_total).
  void add_stage_reset();
  // An event this worker counted (as it reports to the registry): swarm_worker_events_total{kind}.
  void add_event(const std::string& kind, int64_t count);
  // A trainer drew a microbatch from its dataset in `seconds` (swarm_data_wait_seconds_total and
  // the per-microbatch histogram swarm_data_wait_seconds).
  void add_data_wait(double seconds);
  // A trainer finished a microbatch of `samples` (its backward reached stage 0), or gave one up:
  // swarm_trainer_samples_completed_total and swarm_trainer_microbatches_lost_total, the trainer's
  // side of the step invariant (`swarm step-check`).
  void add_completed_samples(int64_t samples);
  void add_microbatch_lost();

  // A worker's device path (model::StageCompute), as running totals since the process started;
  // counters advance by the difference to the last call.
  struct ComputeState {
    double loss_scale = 0;            // fp16 dynamic loss scale; 0: no loss scaling (not exported)
    int64_t skipped_steps = 0;        // optimizer steps skipped on a non-finite gradient
    int64_t staging_allocations = 0;  // host staging buffers created
    int64_t staging_reuses = 0;       // host staging buffers handed out again
    double staging_bytes = 0;         // bytes the staging pool holds (in use or idle)
    double staging_buffers = 0;
  };
  void set_compute_state(const ComputeState& state) EXCLUDES(compute_mu_);

 private:
  // The constructor's families, by concern.
  void register_request_metrics();
  void register_training_metrics();
  void register_staging_metrics();

  prometheus::Gauge& gauge(prometheus::Family<prometheus::Gauge>& f, int stage);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<http::MetricsEndpoint> endpoint_;  // serves /metrics and /readyz
  int port_ = 0;
  mutable swarm::Mutex readiness_mu_;
  std::function<bool()> readiness_ GUARDED_BY(readiness_mu_);
  prometheus::Labels base_;
  prometheus::Family<prometheus::Counter>* samples_ = nullptr;
  prometheus::Family<prometheus::Histogram>* latency_ = nullptr;
  prometheus::Family<prometheus::Counter>* retries_ = nullptr;
  prometheus::Family<prometheus::Counter>* failures_ = nullptr;
  prometheus::Family<prometheus::Counter>* events_ = nullptr;
  prometheus::Family<prometheus::Gauge>* queue_ = nullptr;
  prometheus::Counter* sent_ = nullptr;
  prometheus::Counter* received_ = nullptr;
  prometheus::Gauge* loss_ = nullptr;
  prometheus::Family<prometheus::Gauge>* step_ = nullptr;
  prometheus::Family<prometheus::Gauge>* peers_ = nullptr;
  prometheus::Family<prometheus::Histogram>* averaging_ = nullptr;
  prometheus::Family<prometheus::Gauge>* group_size_ = nullptr;
  prometheus::Family<prometheus::Gauge>* lr_ = nullptr;
  prometheus::Family<prometheus::Gauge>* loss_scale_ = nullptr;
  prometheus::Counter* skipped_steps_ = nullptr;
  prometheus::Counter* stage_resets_ = nullptr;
  prometheus::Counter* staging_allocations_ = nullptr;
  prometheus::Counter* staging_reuses_ = nullptr;
  prometheus::Gauge* staging_bytes_ = nullptr;
  prometheus::Gauge* staging_buffers_ = nullptr;
  prometheus::Family<prometheus::Counter>* compute_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* wait_seconds_ = nullptr;
  prometheus::Counter* data_wait_total_ = nullptr;
  prometheus::Histogram* data_wait_ = nullptr;
  prometheus::Counter* completed_samples_ = nullptr;
  prometheus::Counter* microbatches_lost_ = nullptr;
  swarm::Mutex compute_mu_;
  ComputeState compute_last_ GUARDED_BY(compute_mu_);  // what set_compute_state last saw (counter deltas)
};

}  // namespace swarm::runtime
