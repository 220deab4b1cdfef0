#include "worker/runtime/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <stdexcept>

#include "common/metrics_endpoint.h"
#include "common/ports.h"

namespace swarm::runtime {
namespace {

prometheus::Histogram::BucketBoundaries latency_buckets() {
  // 1 ms .. ~65 s, doubling: covers loopback RPCs and slow cross-region requests alike.
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 0.001; v < 70; v *= 2) b.push_back(v);
  return b;
}

}  // namespace

// Requests, bytes on the wire, stage time and the events a worker counts.
void Metrics::register_request_metrics() {
  using namespace prometheus;
  samples_ = &BuildCounter().Name("swarm_samples_processed_total")
                  .Help("Samples processed, by stage and operation").Register(*registry_);
  latency_ = &BuildHistogram().Name("swarm_request_duration_seconds")
                  .Help("Request latency (trainer: round trip; worker: queue + compute)")
                  .Register(*registry_);
  retries_ = &BuildCounter().Name("swarm_requests_retried_total")
                  .Help("Requests retried on another peer of the stage").Register(*registry_);
  failures_ = &BuildCounter().Name("swarm_request_failures_total")
                   .Help("Requests that failed or timed out").Register(*registry_);
  queue_ = &BuildGauge().Name("swarm_queue_length")
                .Help("Requests waiting in the worker's compute queue").Register(*registry_);
  auto& sent = BuildCounter().Name("swarm_network_sent_bytes_total")
                   .Help("Bytes sent on the data plane").Register(*registry_);
  auto& recv = BuildCounter().Name("swarm_network_received_bytes_total")
                   .Help("Bytes received on the data plane").Register(*registry_);
  sent_ = &sent.Add(base_);
  received_ = &recv.Add(base_);
  events_ = &BuildCounter().Name("swarm_worker_events_total")
                 .Help("Events this worker counted itself, by kind (resyncs, handoffs, stale_handoffs_taken, "
                       "unaveraged_steps, samples_lost, ...): the same counts the registry sums over the job")
                 .Register(*registry_);
  compute_seconds_ = &BuildCounter().Name("swarm_stage_compute_seconds_total")
                         .Help("Seconds of compute per stage: on a worker, its own (forward, backward); on a trainer, "
                               "what the stages it called report for its requests")
                         .Register(*registry_);
  wait_seconds_ = &BuildCounter().Name("swarm_stage_wait_seconds_total")
                      .Help("On a trainer: seconds its requests to each stage spent outside the stage's compute "
                            "(network, queue); with swarm_stage_compute_seconds_total, whether a job is network-bound")
                      .Register(*registry_);
}

// Loss, steps, peers, averaging, learning rate, fp16 loss scale, resets and data wait.
void Metrics::register_training_metrics() {
  using namespace prometheus;
  auto& loss = BuildGauge().Name("swarm_loss").Help("Training loss (moving average)").Register(*registry_);
  loss_ = &loss.Add(base_);
  step_ = &BuildGauge().Name("swarm_optimizer_step")
               .Help("Optimizer steps taken by the stage").Register(*registry_);
  peers_ = &BuildGauge().Name("swarm_stage_peers")
                .Help("Live peers per stage as this process sees them").Register(*registry_);
  averaging_ = &BuildHistogram().Name("swarm_averaging_duration_seconds")
                    .Help("Gradient averaging + optimizer step duration, per step").Register(*registry_);
  group_size_ = &BuildGauge().Name("swarm_averaging_group_size")
                     .Help("Peers in the averaging group of the last step").Register(*registry_);
  lr_ = &BuildGauge().Name("swarm_learning_rate").Help("Current learning rate").Register(*registry_);
  loss_scale_ = &BuildGauge().Name("swarm_loss_scale")
                     .Help("fp16 dynamic loss scale (present only with loss scaling)").Register(*registry_);
  skipped_steps_ = &BuildCounter().Name("swarm_optimizer_skipped_steps_total")
                        .Help("Optimizer steps skipped on a non-finite (overflowed) gradient")
                        .Register(*registry_).Add(base_);
  stage_resets_ = &BuildCounter().Name("swarm_stage_reset_total")
                       .Help("Times this worker found its stage without state (no live peer, no checkpoint) "
                             "after the job had trained: the job stops")
                       .Register(*registry_).Add(base_);
  data_wait_total_ = &BuildCounter().Name("swarm_data_wait_seconds_total")
                         .Help("On a trainer: seconds its microbatches waited on the dataset (drawing windows, "
                               "copying them into tensors); per step: its rate over swarm_optimizer_step's")
                         .Register(*registry_).Add(base_);
  data_wait_ = &BuildHistogram().Name("swarm_data_wait_seconds")
                   .Help("On a trainer: seconds one microbatch waited on the dataset")
                   .Register(*registry_)
                   .Add(base_, Histogram::BucketBoundaries{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1});
  completed_samples_ = &BuildCounter().Name("swarm_trainer_samples_completed_total")
                            .Help("On a trainer: samples of the microbatches it finished (forward and backward "
                                  "through every stage); a stage's step holds the global batch of them")
                            .Register(*registry_).Add(base_);
  microbatches_lost_ = &BuildCounter().Name("swarm_trainer_microbatches_lost_total")
                            .Help("On a trainer: microbatches it gave up (no peer of a stage answered in time)")
                            .Register(*registry_).Add(base_);
}

// The host staging pool (pinned buffers on CUDA).
void Metrics::register_staging_metrics() {
  using namespace prometheus;
  staging_allocations_ = &BuildCounter().Name("swarm_staging_buffer_allocations_total")
                              .Help("Host staging buffers allocated (pinned on CUDA); flat once warm")
                              .Register(*registry_).Add(base_);
  staging_reuses_ = &BuildCounter().Name("swarm_staging_buffer_reuses_total")
                         .Help("Host staging buffers reused from the pool").Register(*registry_).Add(base_);
  staging_bytes_ = &BuildGauge().Name("swarm_staging_cached_bytes")
                        .Help("Bytes held by the host staging pool").Register(*registry_).Add(base_);
  staging_buffers_ = &BuildGauge().Name("swarm_staging_buffers")
                          .Help("Buffers held by the host staging pool").Register(*registry_).Add(base_);
}

Metrics::Metrics(const std::string& bind, const std::string& role, const std::string& peer_id)
    : registry_(std::make_shared<prometheus::Registry>()), base_{{"role", role}, {"peer", peer_id}} {
  register_request_metrics();
  register_training_metrics();
  register_staging_metrics();

  // /metrics is served by the project's HTTP server (prometheus-cpp's civetweb exposer fails to
  // start in a process that also loads Debian's libtorch; cpprest's listener buffers any body).
  auto [host, port] = split_host_port(bind, "metrics address");
  try {
    endpoint_ = std::make_unique<http::MetricsEndpoint>(
        host, port, [this] { return exposition(); }, [this](const std::string& path) -> std::optional<http::Response> {
          if (path != "/readyz") return std::nullopt;
          const bool up = ready();
          return http::Response{up ? 200 : 503, up ? "serving\n" : "not serving\n"};
        });
  } catch (const std::exception& e) {
    throw std::runtime_error("metrics: cannot listen on " + host + ":" + std::to_string(port) + ": " + e.what());
  }
  port_ = endpoint_->port();
}

Metrics::~Metrics() = default;

void Metrics::set_readiness(std::function<bool()> ready) {
  swarm::MutexLock lk(readiness_mu_);
  readiness_ = std::move(ready);
}

bool Metrics::ready() const {
  std::function<bool()> f;
  {
    swarm::MutexLock lk(readiness_mu_);
    f = readiness_;
  }
  return f && f();
}

std::string Metrics::exposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

prometheus::Gauge& Metrics::gauge(prometheus::Family<prometheus::Gauge>& f, int stage) {
  auto labels = base_;
  labels["stage"] = std::to_string(stage);
  return f.Add(labels);
}

void Metrics::observe_request(int stage, const std::string& op, double seconds, int64_t samples) {
  auto labels = base_;
  labels["stage"] = std::to_string(stage);
  labels["op"] = op;
  latency_->Add(labels, latency_buckets()).Observe(seconds);
  if (samples > 0) samples_->Add(labels).Increment(static_cast<double>(samples));
}

void Metrics::add_retry(int stage, const std::string& op) {
  auto labels = base_;
  labels["stage"] = std::to_string(stage);
  labels["op"] = op;
  retries_->Add(labels).Increment();
}

void Metrics::add_failure(int stage, const std::string& op) {
  auto labels = base_;
  labels["stage"] = std::to_string(stage);
  labels["op"] = op;
  failures_->Add(labels).Increment();
}

void Metrics::set_queue_length(int stage, double n) { gauge(*queue_, stage).Set(n); }
void Metrics::add_stage_time(int stage, double compute_seconds, double wait_seconds) {
  auto labels = base_;
  labels["stage"] = std::to_string(stage);
  if (compute_seconds > 0) compute_seconds_->Add(labels).Increment(compute_seconds);
  if (wait_seconds > 0) wait_seconds_->Add(labels).Increment(wait_seconds);
}
void Metrics::add_bytes(uint64_t sent, uint64_t received) {
  if (sent) sent_->Increment(static_cast<double>(sent));
  if (received) received_->Increment(static_cast<double>(received));
}
void Metrics::set_loss(double loss) { loss_->Set(loss); }

void Metrics::add_data_wait(double seconds) {
  data_wait_total_->Increment(std::max(0.0, seconds));
  data_wait_->Observe(seconds);
}
void Metrics::add_completed_samples(int64_t samples) {
  if (samples > 0) completed_samples_->Increment(static_cast<double>(samples));
}
void Metrics::add_microbatch_lost() { microbatches_lost_->Increment(); }
void Metrics::set_optimizer_step(int stage, double step) { gauge(*step_, stage).Set(step); }
void Metrics::set_peers(int stage, double n) { gauge(*peers_, stage).Set(n); }
void Metrics::set_learning_rate(int stage, double lr) { gauge(*lr_, stage).Set(lr); }

void Metrics::add_event(const std::string& kind, int64_t count) {
  if (count <= 0) return;
  auto labels = base_;
  labels["kind"] = kind;
  events_->Add(labels).Increment(static_cast<double>(count));
}

void Metrics::add_stage_reset() { stage_resets_->Increment(); }

void Metrics::set_compute_state(const ComputeState& state) {
  swarm::MutexLock lk(compute_mu_);
  auto advance = [](prometheus::Counter* c, int64_t now, int64_t& last) {
    if (now > last) c->Increment(static_cast<double>(now - last));
    last = std::max(last, now);
  };
  advance(skipped_steps_, state.skipped_steps, compute_last_.skipped_steps);
  advance(staging_allocations_, state.staging_allocations, compute_last_.staging_allocations);
  advance(staging_reuses_, state.staging_reuses, compute_last_.staging_reuses);
  staging_bytes_->Set(state.staging_bytes);
  staging_buffers_->Set(state.staging_buffers);
  if (state.loss_scale > 0) loss_scale_->Add(base_).Set(state.loss_scale);
}

void Metrics::observe_averaging(int stage, double seconds, double group_size) {
  auto labels = base_;
  labels["stage"] = std::to_string(stage);
  averaging_->Add(labels, latency_buckets()).Observe(seconds);
  group_size_->Add(labels).Set(group_size);
}

}  // namespace swarm::runtime
