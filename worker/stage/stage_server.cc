#include "worker/stage/stage_server.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/atomic_file.h"
#include "common/cpu_cores.h"
#include "common/process_memory.h"
#include "planner/rebalance.h"
#include "registry/wire.h"
#include "worker/model/device.h"
#include "worker/model/precision.h"
#include "worker/runtime/job_model.h"
#include "worker/runtime/protocol.h"
#include "worker/stage/stage_server_impl.h"

namespace swarm::runtime {

namespace {

const char* op_name(uint16_t type) {
  switch (type) {
    case net::Forward: return "forward";
    case net::Backward: return "backward";
    case net::ForwardBackward: return "forward_backward";
    case net::StateRequest: return "state";
    default: return "other";
  }
}

// How long a stopping worker retries its last registry calls (deregistering, the counts the
// registry has not taken): a registry restarting comes back within about a second.
constexpr double kFinalRegistrySeconds = 1.5;

}  // namespace

StageServer::Impl::Impl(WorkerOptions o)
    : opt(std::move(o)),
      activations(now_seconds, opt.spec.timeouts.activation_ttl_seconds,
                  static_cast<size_t>(opt.max_activations)) {
  model_cfg = model_config(opt.spec);
  codec = pipeline_codec(opt.spec);
  max_handoff_lag = opt.spec.averaging.max_handoff_lag_steps;
  target_samples = opt.spec.training.global_batch;
  if (opt.stage < -1 || opt.stage >= opt.spec.pipeline.stages)
    throw std::invalid_argument("worker --stage: must be auto or in [0, " +
                                std::to_string(opt.spec.pipeline.stages - 1) + "], got " +
                                std::to_string(opt.stage));
  if (opt.peer_id.empty()) throw std::invalid_argument("worker --peer-id: must not be empty");
}

StageServer::StageServer(WorkerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

StageServer::~StageServer() { stop(); }

void StageServer::start() {
  auto& I = *impl_;
  if (I.started.exchange(true)) return;
  const double t_start = now_seconds();
  spdlog::info("worker {}: starting", I.opt.peer_id);
  const auto& spec = I.opt.spec;
  I.opt.threads = I.opt.threads > 0 ? I.opt.threads : usable_cores();
  torch::set_num_threads(I.opt.threads);
  spdlog::info("worker {}: {} torch threads", I.opt.peer_id, I.opt.threads);
  I.device = model::pick_device(spec.workers.device);
  {
    model::StageComputeOptions co;
    co.force_loss_scaling = I.opt.force_loss_scaling;
    if (I.opt.initial_loss_scale > 0) {
      co.scaler.init_scale = I.opt.initial_loss_scale;
      co.scaler.max_scale = std::max(co.scaler.max_scale, I.opt.initial_loss_scale);
    }
    const auto precision = model::pick_precision(spec.workers.precision, I.device);
    I.compute = std::make_unique<model::StageCompute>(I.device, precision, co);
    if (I.compute->precision() != precision)
      spdlog::warn("worker {}: spec.workers.precision {} computes in {} on {}", I.opt.peer_id,
                   model::precision_name(precision), model::precision_name(I.compute->precision()),
                   I.device.str());
  }
  I.metrics = std::make_unique<Metrics>(I.opt.metrics_bind, "worker", I.opt.peer_id);
  // Ready (GET /readyz, the pod's readiness probe) while serving its stage: not while joining or
  // downloading state, draining or moving, nor after its stage came back without state.
  I.metrics->set_readiness([&I] {
    swarm::MutexLock lk(I.mu);
    return I.ready && !I.leaving && !I.failed;
  });
  I.client_options.connect_timeout = to_ms(spec.timeouts.connect_seconds);
  I.client_options.protection = protection_of(spec);
  net::ServerOptions server_options;
  server_options.protection = protection_of(spec);
  I.server = std::make_unique<net::Server>(
      I.opt.host, static_cast<uint16_t>(I.opt.port), I.opt.secret,
      [&I](net::Message&& m) { return I.handle(std::move(m)); }, server_options);
  I.server->start();
  I.registry = std::make_unique<registry::RegistryClient>(I.opt.registry_url,
                                                          to_ms(spec.timeouts.connect_seconds), I.opt.secret);
  // A worker started without a stage joins the most loaded one (planner/rebalance.h), of its
  // region's pool when it names a region; either way
  // it starts from a live peer's parameters and optimizer state when the stage has one.
  int first = I.opt.stage;
  if (first < 0) {
    std::vector<planner::PeerLoad> loads;
    for (const auto& p : I.registry->peers("worker")) {
      if (p.state == planner::PeerState::Draining) continue;  // leaving: its capacity is gone
      loads.push_back({p.peer_id, p.stage, static_cast<double>(p.queue_length), p.samples_per_second,
                       p.state == planner::PeerState::Joining, p.region});
    }
    planner::RebalanceOptions ro;
    ro.min_gain = spec.rebalancing.min_gain;  // the bottleneck band, as the rebalancer uses it
    // Its region's pool when it has one: the stage its own region's pipeline lacks most.
    first = planner::choose_stage_for_joiner(loads, static_cast<int>(spec.pipeline.stages), ro, I.opt.region);
  }
  if (!I.opt.spec.checkpoint.path.empty())
    I.checkpoint_writer = std::make_unique<CheckpointWriter>([&I](CheckpointJob& j) { I.write_checkpoint_job(j); });
  // The heartbeat runs while the state downloads ("joining"): a download longer than the peer
  // expiry must not make the registry count the newcomer as lost.
  I.heartbeat_thread = std::thread([&I] { I.heartbeat_loop(); });
  const double t_join = now_seconds();
  I.become_stage(first, I.opt.stage < 0 ? "joined the most loaded stage" : "assigned");
  I.compute_thread = std::thread([&I] { I.compute_loop(); });
  I.progress_thread = std::thread([&I] { I.progress_loop(); });
  spdlog::info("worker {} serving stage {} at step {} on {}:{} (metrics :{}), device {}, precision {}, {} threads; "
               "started in {:.2f} s ({:.2f} s joining the stage), peak RSS {:.1f} MB",
               I.opt.peer_id, I.stage.load(), I.step.load(), I.opt.host, I.server->port(), I.metrics->port(),
               I.device.str(), I.compute->describe(), torch::get_num_threads(), now_seconds() - t_start,
               now_seconds() - t_join, static_cast<double>(peak_resident_bytes().value_or(0)) / 1e6);
}

void StageServer::stop() {
  auto& I = *impl_;
  if (!I.started || I.stopped.exchange(true)) return;
  if (I.metrics) I.metrics->set_readiness(nullptr);
  // The registry calls that follow are retried for a moment (a registry restarting comes back
  // within about a second), never past a drain's budget: out before the SIGKILL.
  double until = now_seconds() + kFinalRegistrySeconds;
  {
    swarm::MutexLock lk(I.mu);
    I.stopping = true;
    if (I.exit_by > 0) until = std::min(until, I.exit_by);
  }
  I.cv.notify_all();
  I.inbox.stop();
  // The heartbeat ends before the withdrawal: an announce still in flight after it would list the
  // peer again, and its later expiry would count a peer that left cleanly as lost.
  if (I.heartbeat_thread.joinable()) I.heartbeat_thread.join();
  for (bool withdrawn = !I.registry; !withdrawn;) {
    try {
      I.registry->withdraw(I.opt.peer_id, /*settled=*/true);
      withdrawn = true;
    } catch (const std::exception& e) {
      if (now_seconds() >= until) {
        spdlog::warn("worker {}: could not deregister (its record expires): {}", I.opt.peer_id, e.what());
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (auto* t : {&I.compute_thread, &I.progress_thread})
    if (t->joinable()) t->join();
  if (I.checkpoint_writer) I.checkpoint_writer->flush();  // the last checkpoint is written before exit
  // The counts still unsent go now: the log and the report say which never got there.
  while (!I.flush_events() && now_seconds() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (const auto left = I.events.pending(); !left.empty())
    spdlog::error("worker {}: the registry never took these counts: {}", I.opt.peer_id, nlohmann::json(left).dump());
  I.write_report();
  if (I.server) I.server->stop();
}

int StageServer::port() const { return impl_->server ? impl_->server->port() : 0; }
int StageServer::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

WorkerStatus StageServer::status() const {
  auto& I = *impl_;
  swarm::MutexLock lk(I.mu);
  WorkerStatus s;
  s.stage = I.stage;
  s.ready = I.ready;
  s.failed = I.failed;
  s.step = I.step;
  s.samples_in_step = I.samples_done;
  s.queue_length = static_cast<int64_t>(I.queue.size());
  s.activations = static_cast<int64_t>(I.activations.size());
  s.fingerprint = I.fingerprint;
  s.samples_processed = I.processed;
  if (I.compute) {
    s.precision = I.compute->describe();
    s.loss_scale = I.compute->loss_scale();
    s.skipped_steps = I.compute->skipped_steps();
    const auto st = I.compute->staging_stats();
    s.staging_allocations = st.allocations;
    s.staging_reuses = st.reuses;
  }
  return s;
}

void StageServer::Impl::write_report() const {
  if (opt.report_path.empty()) return;
  nlohmann::json r{{"peer", opt.peer_id},
                   {"stage", stage.load()},
                   {"step", step.load()},
                   {"samples_processed", processed.load()},
                   {"events", events.counted()},
                   {"events_unacknowledged", events.pending()},
                   {"event_sends_failed", events.failed_sends()},
                   {"peak_rss_bytes", peak_resident_bytes().value_or(0)}};
  try {
    write_file_atomically(opt.report_path, r.dump());
  } catch (const std::exception& e) {
    spdlog::error("worker {}: cannot write its report {}: {}", opt.peer_id, opt.report_path, e.what());
  }
}

// ---- requests -------------------------------------------------------------------------------

net::Message StageServer::Impl::handle(net::Message&& request) {
  switch (request.type) {
    case net::AveragePush:
      return handle_average_push(std::move(request));
    case net::Ping:
      return make_message(net::Pong, {{"stage", stage.load()}, {"step", step.load()},
                                      {"queue", queue.size()}, {"peer", opt.peer_id}});
    case kGradientHandoff:
      return handle_handoff(std::move(request));
    case net::Forward:
    case net::Backward:
    case net::ForwardBackward:
    case net::StateRequest:
      break;
    default:
      throw std::invalid_argument("message type " + std::to_string(request.type) +
                                  " is not served by a worker");
  }
  auto task = std::make_shared<Task>();
  task->meta = parse_meta(request);
  const int64_t requested = meta_int(task->meta, "stage");
  if (requested != stage.load())
    throw std::invalid_argument("meta.stage: this worker serves stage " + std::to_string(stage.load()) +
                                ", got " + std::to_string(requested));
  if (!ready) {
    swarm::MutexLock lk(mu);
    if (failed) throw std::runtime_error(failure_message);
    throw std::runtime_error("peer is joining its stage, not serving yet");
  }
  if (request.type != net::StateRequest) {
    RequestQueue::check_samples(meta_int(task->meta, "samples"));
    meta_string(task->meta, "mb");
    // A retry names the peer that held its work: it goes to the registry with this peer's claim.
    if (auto from = task->meta.find("from"); from != task->meta.end())
      if (!from->is_string() || !registry::wire::valid_peer_id(from->get<std::string>()))
        throw std::invalid_argument("meta.from: must be a peer id (1-128 characters of [A-Za-z0-9._-]), got " +
                                    registry::wire::describe(*from));
  }
  if (request.type == net::ForwardBackward && stage.load() != opt.spec.pipeline.stages - 1)
    throw std::invalid_argument("forward_backward is served by the last stage only; this is stage " +
                                std::to_string(stage.load()));
  task->request = std::move(request);
  auto reply = task->reply.get_future();
  {
    // Queued under mu: the compute loop checks the queue under mu before it waits on cv.
    swarm::MutexLock lk(mu);
    if (stopping || left) throw std::runtime_error("worker is stopping");
    queue.push(task);
    metrics->set_queue_length(stage.load(), static_cast<double>(queue.size()));
  }
  cv.notify_all();
  return reply.get();
}

Admission StageServer::Impl::admission_locked() const {
  return Admission{leaving, claimed - claim_used, activations.ids(step.load())};
}

void StageServer::Impl::release_claim_locked(int64_t samples) {
  if (samples <= 0) return;
  claim_used = std::max<int64_t>(samples_done, claim_used - samples);
  claimed = std::min(claimed, claim_used);
  step_full = false;  // until the coordinator says otherwise: the claim goes back with the next report
  closing_since = 0;
  claim_wanted = true;
}

std::shared_ptr<Task> StageServer::Impl::next_task_locked() {
  bool held = false;
  const Admission a = admission_locked();
  auto task = queue.take(a, &held);
  // Admitted into the step under this peer's claim (a leaving peer answers new work with an error).
  if (task && !leaving && RequestQueue::needs_claim(*task, a.activations)) {
    task->admitted = meta_int(task->meta, "samples", 0);
    claim_used += task->admitted;
  }
  if (held) claim_wanted = true;  // progress_loop asks for the claim now
  return task;
}

void StageServer::Impl::expire_queued_forwards() {
  for (const uint16_t type : queue.expire_waiting(opt.spec.timeouts))
    metrics->add_failure(stage.load(), op_name(type));
}

void StageServer::Impl::compute_loop() {
  torch::set_num_threads(std::max(1, opt.threads));  // per thread under OpenMP: the compute thread's own
  while (true) {
    std::shared_ptr<Task> task;
    {
      swarm::MutexLock lk(mu);
      // The timeout bounds how late activation expiry and the drain deadline are noticed.
      cv.wait_for(mu, std::chrono::milliseconds(50), [&]() REQUIRES(mu) {
        return stopping || step_due_locked() || queue.has_eligible(admission_locked()) || resync_requested ||
               (move_to >= 0 && !leaving);
      });
      if (stopping || left) break;
      const double now = now_seconds();
      if (move_to >= 0 && !leaving) start_leave_locked(now);
      int64_t expired = 0;
      activations.expire(&expired);
      release_claim_locked(expired);
      expire_queued_forwards();
      drop_overdue_activations_locked(now);
      if (!step_due_locked()) task = next_task_locked();
      metrics->set_queue_length(stage.load(), static_cast<double>(queue.size()));
      if (claim_wanted) cv.notify_all();
    }
    if (!task) {
      idle_step();
      continue;
    }
    serve_task(*task);
    // Keep taking work without waiting when more is queued.
    cv.notify_all();
  }
  swarm::MutexLock lk(mu);
  queue.fail_all("worker is stopping");
}

void StageServer::Impl::start_leave_locked(double now) {
  // The rebalancer moved this peer: finish the backwards it owes, then go.
  leaving = true;
  leave_deadline = now + opt.spec.timeouts.backward_seconds;
  handoff_at = leave_deadline;
  spdlog::info("worker {}: leaving stage {} for stage {}", opt.peer_id, stage.load(), move_to.load());
}

void StageServer::Impl::drop_overdue_activations_locked(double now) {
  // Backwards of a full step that never come (their trainer was killed, or a later stage lost
  // every peer) must not hold the step: their activations are dropped, and a late backward
  // recomputes the forward. The wait is shorter than the stage's averaging gather window (half
  // the averaging timeout): waiting longer, the peers that were due would average without this
  // one and its whole gradient of the step would be lost (a trainer kill cost a re-sync). Their
  // claim goes back: the step closes only once other work filled it, never on fewer samples
  // (a stage whose next stage is gone steps no more, issue 29).
  const double owed_wait =
      std::min(opt.spec.timeouts.backward_seconds, opt.spec.timeouts.averaging_seconds / 4);
  if (step_full && !activations.empty() && closing_since > 0 && now - closing_since > owed_wait) {
    spdlog::warn("worker {}: dropping {} activations whose backward did not come within {:.1f} s of the step's "
                 "close",
                 opt.peer_id, activations.size(), owed_wait);
    release_claim_locked(activations.clear());
  }
  // A leaving peer waits for owed backwards only until its leave deadline; one that never came
  // (its trainer retried the microbatch elsewhere) must not keep it out of the step it holds
  // gradient for. A late backward recomputes on another peer of the stage.
  if (leaving && !activations.empty() && now > leave_deadline) {
    spdlog::info("worker {}: leaving: dropping {} activations whose backward did not come in time",
                 opt.peer_id, activations.size());
    release_claim_locked(activations.clear());
  }
}

bool StageServer::Impl::leave_ready_locked(double now) const {
  const bool owes = !activations.empty() && now <= leave_deadline;
  // A leaving peer holding gradient of this step averages it with the stage on its way
  // out (the stage waits for it: planner/step_book.h): handing it to a peer that is
  // already averaging would come too late. Only a step that does not close in time
  // makes it hand off (complete_leave).
  const bool awaits_step = samples_done > 0 && now < handoff_at;
  return leaving && queue.empty() && !owes && !awaits_step;
}

void StageServer::Impl::idle_step() {
  bool due, leave_now;
  {
    swarm::MutexLock lk(mu);
    due = step_due_locked();
    leave_now = leave_ready_locked(now_seconds());
  }
  if (resync_requested.exchange(false)) {
    resync();
  } else if (due) {
    // fp16: the step was decided on the averaged gradient, the same on every peer of the
    // stage, so all of them skip an overflow together and update their loss scale alike.
    const auto* stepped_by = optimizer.get();
    const int64_t steps = optimizer->step_count(), skipped = optimizer->skipped_steps();
    finish_step();
    if (optimizer.get() == stepped_by && optimizer->step_count() > steps)
      compute->after_step(optimizer->skipped_steps() > skipped);
    publish_compute_metrics();
  } else if (leave_now) {
    complete_leave();
  }
}

void StageServer::Impl::serve_task(Task& task) {
  net::Message reply;
  const double started = now_seconds();
  try {
    reply = run_task(task);
  } catch (const std::exception& e) {
    reply = net::error_reply(task.request.request_id, e);  // a CodedError keeps its code
    metrics->add_failure(stage.load(), op_name(task.request.type));
    if (task.admitted > 0) {  // nothing of it stays: its claim goes back to the step
      swarm::MutexLock lk(mu);
      release_claim_locked(task.admitted);
    }
  }
  if (opt.slowdown > 1)  // an emulated slower machine (benchmarks of rebalancing)
    std::this_thread::sleep_for(std::chrono::duration<double>((opt.slowdown - 1) * (now_seconds() - started)));
  const double done = now_seconds();
  capacity.add_busy(done - started);
  metrics->add_stage_time(stage.load(), done - started, 0);
  if (reply.type != net::Error && task.request.type != net::StateRequest) {
    // The caller learns how much of its request was this stage's compute (the rest: network, queue).
    auto meta = nlohmann::json::parse(reply.meta.empty() ? "{}" : reply.meta, nullptr, false);
    if (meta.is_object()) {
      meta["compute_s"] = done - started;
      reply.meta = meta.dump();
    }
  }
  int64_t samples = meta_int(task.meta, "samples", 0);
  if (reply.type != net::Error) processed += samples;
  metrics->observe_request(stage.load(), op_name(task.request.type), done - task.enqueued_at,
                           reply.type == net::Error ? 0 : samples);
  task.reply.set_value(std::move(reply));
}

void StageServer::Impl::publish_compute_metrics() {
  const auto staging = compute->staging_stats();
  Metrics::ComputeState st;
  st.loss_scale = compute->loss_scale();
  st.skipped_steps = compute->skipped_steps();
  st.staging_allocations = staging.allocations;
  st.staging_reuses = staging.reuses;
  st.staging_bytes = static_cast<double>(staging.cached_bytes);
  st.staging_buffers = static_cast<double>(staging.buffers);
  metrics->set_compute_state(st);
}

void StageServer::Impl::announce(std::optional<planner::PeerState> state) {
  planner::PeerRecord rec;
  rec.peer_id = opt.peer_id;
  rec.role = "worker";
  rec.region = opt.region;
  rec.stage = stage.load();
  rec.host = opt.host;
  rec.port = server->port();
  rec.metrics_port = metrics->port();
  rec.samples_per_second = capacity.samples_per_second();
  bool going = false;
  {
    swarm::MutexLock lk(mu);
    if (stopping) return;  // withdrawn (or about to be): announcing would list it again
    going = exiting;
    if (state) rec.state = *state;
    else if (failed) rec.state = planner::PeerState::Failed;
    else if (!ready) rec.state = planner::PeerState::Joining;
    else if (leaving) rec.state = planner::PeerState::Draining;
    else if (closing_since > 0) rec.state = planner::PeerState::Averaging;
    else rec.state = planner::PeerState::Serving;
    rec.step = step;
    rec.queue_length = static_cast<int64_t>(queue.size());
  }
  auto reply = registry->announce(rec);
  if (reply.assigned_stage >= 0 && reply.assigned_stage != rec.stage && ready && !going &&
      reply.assigned_stage < opt.spec.pipeline.stages) {
    if (move_to.exchange(reply.assigned_stage) != reply.assigned_stage) cv.notify_all();
  }
}

void StageServer::Impl::heartbeat_loop() {
  uint64_t last_sent = 0, last_received = 0;
  while (true) {
    // The capacity it announces (capacity_meter.h); with the queue length, the stage's load.
    capacity.read();
    try {
      if (stage.load() >= 0) {  // not before the first join chose the stage
        report_failure();       // until the registry has it
        flush_events();         // counts the registry did not take yet
        announce();
        if (ready) check_behind(registry->peers("worker", stage.load()));
        retell_group();
      }
    } catch (const std::exception& e) {
      progress_unsure = true;
      spdlog::warn("worker {}: heartbeat failed: {}", opt.peer_id, e.what());
    }
    publish_compute_metrics();
    auto st = server->stats();
    metrics->add_bytes(st.bytes_out - last_sent, st.bytes_in - last_received);
    last_sent = st.bytes_out;
    last_received = st.bytes_in;
    swarm::MutexLock lk(mu);
    cv.wait_for(mu, to_ms(opt.spec.timeouts.heartbeat_seconds), [&]() REQUIRES(mu) { return stopping; });
    if (stopping) break;
  }
}

}  // namespace swarm::runtime
