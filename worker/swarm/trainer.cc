#include "worker/swarm/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <thread>

#include "common/thread_annotations.h"
#include "planner/stage_router.h"
#include "registry/registry_client.h"
#include "worker/data/text_dataset.h"
#include "worker/net/client.h"
#include "worker/swarm/metrics.h"
#include "worker/swarm/protocol.h"
#include "worker/swarm/clock.h"
#include "worker/swarm/tensor_wire.h"

namespace swarm::runtime {
namespace {


struct MicrobatchLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename to " + path);
}

}  // namespace

nlohmann::json TrainerReport::to_json() const {
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& [s, l] : loss_curve) curve.push_back({s, l});
  nlohmann::json prog = nlohmann::json::array();
  for (const auto& [t, n] : progress) prog.push_back({t, n});
  return {{"steps", steps},
          {"samples", samples},
          {"microbatches", microbatches},
          {"samples_per_second", samples_per_second},
          {"loss_first", loss_first},
          {"loss_last", loss_last},
          {"loss_ema", loss_ema},
          {"eval_loss", eval_loss},
          {"peers_per_stage", peers_per_stage},
          {"stage_steps", stage_steps},
          {"requests_retried", requests_retried},
          {"microbatches_lost", microbatches_lost},
          {"samples_recomputed", samples_recomputed},
          {"train_seconds", train_seconds},
          {"wire_bytes", wire_bytes},
          {"stage_compute_seconds", stage_compute_seconds},
          {"stage_wait_seconds", stage_wait_seconds},
          {"wire_bytes_per_sample", wire_bytes_per_sample},
          {"finished", finished},
          {"loss_curve", curve},
          {"progress", prog}};
}

struct Trainer::Impl {
  explicit Impl(TrainerOptions o)
      : opt(std::move(o)),
        stages(opt.spec.pipeline.stages),
        dataset(data::TextDataset::load(opt.spec.training.dataset.path)),
        sampler(dataset, opt.spec.model.sequence_length, opt.spec.training.seed, opt.index),
        stage_step(stages) {
    if (opt.max_steps <= 0) opt.max_steps = opt.spec.training.max_steps;
    if (opt.eval_batches < 0) opt.eval_batches = static_cast<int>(opt.spec.training.eval_batches);
    planner::RouterOptions ro;
    ro.ema_alpha = opt.spec.trainers.routing.ema_alpha;
    ro.backward_weight = opt.spec.trainers.routing.backward_weight;
    ro.explore_peer_seconds = opt.spec.trainers.routing.explore_peer_seconds;
    for (int s = 0; s < stages; ++s) routers.push_back(std::make_unique<planner::StageRouter>(ro));
    for (auto& r : stage_step) r = 0;
    peers_per_stage.assign(stages, 0);
    {
      swarm::MutexLock lk(loss_mu);
      stage_compute.assign(stages, 0.0);
      stage_wait.assign(stages, 0.0);
    }
    client_options.connect_timeout = to_ms(opt.spec.timeouts.connect_seconds);
    client_options.protection = protection_of(opt.spec);
  }

  void refresh_peers();
  // Heartbeat to the registry (role trainer): its step, samples/s and recent loss, which the
  // operator reads into the SwarmJob's status; a live trainer also tells the rebalancer there is
  // work to balance. No-op once training is over.
  void announce();
  // Training is over: stop announcing and withdraw from the registry.
  void withdraw();
  std::shared_ptr<net::Client> client_for(const std::string& peer);
  net::Message call(int stage, planner::Op op, int64_t samples, double timeout,
                    const std::function<net::Message(bool failover)>& build, const std::string& preferred,
                    std::string* used);
  void run_microbatch(uint64_t seq);
  double evaluate();
  // One pass of the thread beside the training loop: discovery, the heartbeat when one is due,
  // the progress sample and the report file once a second (`last_*` carry the times between passes).
  void background_pass(double& last_report, double& last_announce);
  // Waits until every stage has a live worker; false when `stop` or wait_for_peers_seconds came first.
  bool wait_for_peers(const std::atomic<bool>& stop);
  // The training lanes (inflight_microbatches threads) until max steps, max seconds or `stop`.
  void train(const std::atomic<bool>& stop);
  void train_gpipe(const std::function<bool()>& keep_going);
  void end_training();
  void await_stage_steps(int64_t target);
  int64_t min_step() const {
    int64_t m = INT64_MAX;
    for (const auto& r : stage_step) m = std::min<int64_t>(m, r.load());
    return m;
  }
  TrainerReport snapshot();
  void account_bytes() REQUIRES(peers_mu);
  // How much of a request's `seconds` was the stage's compute (its reply says), the rest waiting.
  void note_time(int stage, const net::Message& reply, double seconds) {
    const double compute = std::min(seconds, std::max(0.0, parse_meta(reply).value("compute_s", 0.0)));
    metrics->add_stage_time(stage, compute, seconds - compute);
    swarm::MutexLock lk(loss_mu);
    stage_compute[stage] += compute;
    stage_wait[stage] += seconds - compute;
  }
  void note_step(int stage, const net::Message& reply) {
    auto meta = parse_meta(reply);
    int64_t r = meta_int(meta, "step", 0);
    int64_t cur = stage_step[stage].load();
    while (r > cur && !stage_step[stage].compare_exchange_weak(cur, r)) {
    }
  }

  TrainerOptions opt;
  int stages;
  data::TextDataset dataset;
  swarm::Mutex sampler_mu;
  data::BatchSampler sampler GUARDED_BY(sampler_mu);
  std::vector<std::unique_ptr<planner::StageRouter>> routers;
  std::unique_ptr<registry::RegistryClient> registry;
  std::unique_ptr<Metrics> metrics;
  net::ClientOptions client_options;

  swarm::Mutex peers_mu;
  std::map<std::string, std::pair<std::string, std::shared_ptr<net::Client>>> clients GUARDED_BY(peers_mu);  // id -> (endpoint, client)
  std::vector<int> peers_per_stage GUARDED_BY(peers_mu);

  std::vector<std::atomic<int64_t>> stage_step;
  std::atomic<int64_t> retried{0}, lost{0}, recomputed{0}, samples{0}, microbatches{0};
  uint64_t bytes_sent GUARDED_BY(peers_mu) = 0;      // what the clients had counted at the last account_bytes
  uint64_t bytes_received GUARDED_BY(peers_mu) = 0;
  uint64_t wire_bytes GUARDED_BY(peers_mu) = 0;      // sent + received since the trainer started
  uint64_t train_wire_bytes GUARDED_BY(peers_mu) = 0;  // wire_bytes when training ended (before eval)

  swarm::Mutex loss_mu;
  std::vector<double> first_losses GUARDED_BY(loss_mu);
  std::vector<double> stage_compute GUARDED_BY(loss_mu);  // seconds, summed over this trainer's requests
  std::vector<double> stage_wait GUARDED_BY(loss_mu);
  std::vector<double> recent_losses GUARDED_BY(loss_mu);
  std::vector<std::pair<int64_t, double>> curve GUARDED_BY(loss_mu);
  std::vector<std::pair<double, int64_t>> progress GUARDED_BY(loss_mu);
  double loss_ema GUARDED_BY(loss_mu) = 0;
  // Written by the thread in Trainer::run while the background thread reads them (announce,
  // background_pass, snapshot): atomics, not under loss_mu.
  std::atomic<double> train_started{0}, train_ended{0};
  std::atomic<double> eval_loss{0};
  std::atomic<bool> finished{false};

  swarm::Mutex announce_mu;
  bool training_over GUARDED_BY(announce_mu) = false;
};

void Trainer::Impl::announce() {
  planner::PeerRecord rec;
  rec.peer_id = opt.peer_id;
  rec.role = "trainer";
  rec.stage = -1;
  const std::string bind = opt.metrics_bind;
  const size_t colon = bind.rfind(':');
  rec.host = colon == std::string::npos || colon == 0 ? "127.0.0.1" : bind.substr(0, colon);
  if (rec.host == "0.0.0.0") rec.host = "127.0.0.1";
  rec.metrics_port = metrics ? metrics->port() : 0;
  rec.state = train_started > 0 ? planner::PeerState::Serving : planner::PeerState::Joining;
  const int64_t step = min_step();
  rec.step = step == INT64_MAX ? 0 : step;
  const double elapsed = train_started > 0 ? now_seconds() - train_started : 0;
  rec.samples_per_second = elapsed > 0 ? static_cast<double>(samples.load()) / elapsed : 0;
  {
    swarm::MutexLock lk(loss_mu);
    double sum = 0;
    for (double x : recent_losses) sum += x;
    rec.loss = recent_losses.empty() ? 0 : sum / static_cast<double>(recent_losses.size());
  }
  swarm::MutexLock lk(announce_mu);
  if (training_over) return;
  registry->announce(rec);
}

void Trainer::Impl::withdraw() {
  swarm::MutexLock lk(announce_mu);
  training_over = true;
  try {
    registry->withdraw(opt.peer_id, /*settled=*/true);
  } catch (const std::exception& e) {
    spdlog::warn("trainer {}: could not deregister: {}", opt.peer_id, e.what());
  }
}

void Trainer::Impl::refresh_peers() {
  auto workers = registry->peers("worker");
  std::vector<std::vector<std::string>> ids(stages);
  swarm::MutexLock lk(peers_mu);
  for (const auto& p : workers) {
    // Only peers that serve: not while joining (downloading state) or draining (leaving).
    if (p.stage < 0 || p.stage >= stages || !planner::routable(p.state)) continue;
    ids[p.stage].push_back(p.peer_id);
    const std::string endpoint = p.host + ":" + std::to_string(p.port);
    auto it = clients.find(p.peer_id);
    if (it == clients.end() || it->second.first != endpoint)
      clients[p.peer_id] = {endpoint, std::make_shared<net::Client>(p.host, static_cast<uint16_t>(p.port),
                                                                    opt.secret, client_options)};
  }
  account_bytes();
  const double now = now_seconds();
  for (int s = 0; s < stages; ++s) {
    routers[s]->set_peers(ids[s], now);
    peers_per_stage[s] = static_cast<int>(ids[s].size());
    metrics->set_peers(s, static_cast<double>(ids[s].size()));
  }
}

std::shared_ptr<net::Client> Trainer::Impl::client_for(const std::string& peer) {
  swarm::MutexLock lk(peers_mu);
  auto it = clients.find(peer);
  return it == clients.end() ? nullptr : it->second.second;
}

net::Message Trainer::Impl::call(int stage, planner::Op op, int64_t samples, double timeout,
                                 const std::function<net::Message(bool)>& build,
                                 const std::string& preferred, std::string* used) {
  const char* op_label = op == planner::Op::Forward ? "forward" : "backward";
  std::vector<std::string> tried;
  bool failover = false;
  const double give_up = now_seconds() + 2 * timeout;
  for (int attempt = 0;; ++attempt) {
    std::optional<std::string> peer;
    if (attempt == 0 && !preferred.empty()) peer = preferred;
    else peer = routers[stage]->pick_peer(op, samples, now_seconds(), tried);
    if (!peer && !tried.empty()) {
      // Every peer of the stage failed once: wait for discovery to catch up (a replacement, a
      // peer coming back) before trying them again, rather than spinning on refused connections.
      tried.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 50 << std::min(attempt, 4))));
      peer = routers[stage]->pick_peer(op, samples, now_seconds(), tried);
    }
    if (now_seconds() > give_up)
      throw MicrobatchLost("stage " + std::to_string(stage) + " " + op_label + ": no peer answered in time");
    auto client = peer ? client_for(*peer) : nullptr;
    if (!client) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (attempt > 0) {
      retried++;
      metrics->add_retry(stage, op_label);
    }
    const double t0 = now_seconds();
    try {
      auto reply = client->call(build(failover), to_ms(timeout));
      const double dt = now_seconds() - t0;
      routers[stage]->report_success(*peer, op, samples, dt, now_seconds());
      metrics->observe_request(stage, op_label, dt, samples);
      note_time(stage, reply, dt);
      note_step(stage, reply);
      if (used) *used = *peer;
      return reply;
    } catch (const net::RemoteError& e) {
      // activation_missing: the peer lives but lost the forward; any peer can recompute it.
      if (e.code() != net::ErrorCode::ActivationMissing) {
        spdlog::warn("stage {} {} on {} failed: {}", stage, op_label, *peer, e.what());
        routers[stage]->report_failure(*peer, now_seconds());
      }
      metrics->add_failure(stage, op_label);
    } catch (const net::NetError& e) {
      spdlog::warn("stage {} {} on {} failed: {}", stage, op_label, *peer, e.what());
      routers[stage]->report_failure(*peer, now_seconds());
      metrics->add_failure(stage, op_label);
    }
    if (opt.gpipe)
      throw MicrobatchLost("stage " + std::to_string(stage) + " " + op_label + " on " + *peer +
                           " failed; the gpipe baseline has no failover");
    failover = true;
    tried.push_back(*peer);
  }
}

void Trainer::Impl::run_microbatch(uint64_t seq) {
  const int64_t B = opt.spec.training.microbatch, T = opt.spec.model.sequence_length;
  std::vector<int64_t> in, tg;
  {
    swarm::MutexLock lk(sampler_mu);
    sampler.next(B, in, tg);
  }
  auto tokens = torch::from_blob(in.data(), {B, T}, torch::kInt64).clone();
  auto targets = torch::from_blob(tg.data(), {B, T}, torch::kInt64).clone();
  const std::string mb = opt.peer_id + "/" + std::to_string(seq);
  const auto& to = opt.spec.timeouts;

  // Each stage's input as it came over the wire (compressed as spec.pipeline says): passed on to
  // the next stage and kept for a recompute without decoding it here.
  std::vector<net::WireTensor> inputs(stages);
  std::vector<std::string> fwd_peer(stages);
  inputs[0] = to_wire(tokens);
  for (int s = 0; s + 1 < stages; ++s) {
    auto reply = call(s, planner::Op::Forward, B, to.forward_seconds, [&](bool) {
      auto m = make_message(net::Forward, {{"mb", mb}, {"stage", s}, {"samples", B}});
      m.tensors.push_back(inputs[s]);
      return m;
    }, "", &fwd_peer[s]);
    if (reply.tensors.size() != 1) throw MicrobatchLost("forward reply without an output tensor");
    inputs[s + 1] = std::move(reply.tensors[0]);
  }
  const int last = stages - 1;
  auto reply = call(last, planner::Op::Forward, B, to.forward_seconds + to.backward_seconds, [&](bool) {
    auto m = make_message(net::ForwardBackward, {{"mb", mb}, {"stage", last}, {"samples", B}});
    m.tensors.push_back(inputs[last]);
    m.tensors.push_back(to_wire(targets));
    return m;
  }, "", nullptr);
  const double loss = meta_double(parse_meta(reply), "loss");
  if (reply.tensors.size() != 1) throw MicrobatchLost("forward_backward reply without a gradient");
  net::WireTensor grad = std::move(reply.tensors[0]);
  for (int s = last - 1; s >= 0; --s) {
    auto r = call(s, planner::Op::Backward, B, to.backward_seconds, [&](bool failover) {
      auto m = make_message(net::Backward, {{"mb", mb}, {"stage", s}, {"samples", B}, {"recompute", failover}});
      m.tensors.push_back(grad);
      if (failover) m.tensors.push_back(inputs[s]);
      return m;
    }, fwd_peer[s], nullptr);
    if (meta_bool(parse_meta(r), "recomputed", false)) recomputed += B;
    if (s > 0) {
      if (r.tensors.size() != 1) throw MicrobatchLost("backward reply without a gradient");
      grad = std::move(r.tensors[0]);
    }
  }
  const int64_t done = samples += B;
  microbatches++;
  metrics->set_loss(loss);
  swarm::MutexLock lk(loss_mu);
  const size_t per_batch = static_cast<size_t>(opt.spec.training.global_batch / B);
  if (first_losses.size() < per_batch) first_losses.push_back(loss);
  recent_losses.push_back(loss);
  if (recent_losses.size() > per_batch) recent_losses.erase(recent_losses.begin());
  loss_ema = curve.empty() ? loss : 0.9 * loss_ema + 0.1 * loss;
  if (curve.size() < 4096) curve.emplace_back(done, loss);
}

double Trainer::Impl::evaluate() {
  const int64_t B = opt.spec.training.microbatch;
  const auto& to = opt.spec.timeouts;
  double total = 0;
  int n = 0;
  for (int i = 0; i < opt.eval_batches; ++i) {
    std::vector<int64_t> in, tg;
    {
      swarm::MutexLock lk(sampler_mu);
      sampler.validation_batch(B, i, in, tg);
    }
    const int64_t T = static_cast<int64_t>(in.size()) / B;
    net::WireTensor x = to_wire(torch::from_blob(in.data(), {B, T}, torch::kInt64).clone());
    auto targets = torch::from_blob(tg.data(), {B, T}, torch::kInt64).clone();
    const std::string mb = opt.peer_id + "/eval" + std::to_string(i);
    for (int s = 0; s + 1 < stages; ++s) {
      auto reply = call(s, planner::Op::Forward, B, to.forward_seconds, [&](bool) {
        auto m = make_message(net::Forward, {{"mb", mb}, {"stage", s}, {"samples", B}, {"eval", true}});
        m.tensors.push_back(x);
        return m;
      }, "", nullptr);
      x = std::move(reply.tensors.at(0));
    }
    auto reply = call(stages - 1, planner::Op::Forward, B, to.forward_seconds, [&](bool) {
      auto m = make_message(net::ForwardBackward, {{"mb", mb}, {"stage", stages - 1}, {"samples", B}, {"eval", true}});
      m.tensors.push_back(x);
      m.tensors.push_back(to_wire(targets));
      return m;
    }, "", nullptr);
    total += meta_double(parse_meta(reply), "loss");
    ++n;
  }
  return n ? total / n : 0;
}

// Bytes on the wire: the clients count them; the metric and the report's total get the growth
// since last time (a client replaced since then restarts its count: its growth is taken as is).
void Trainer::Impl::account_bytes() {
  uint64_t in = 0, out = 0;
  for (const auto& [id, entry] : clients) {
    auto st = entry.second->stats();
    in += st.bytes_in;
    out += st.bytes_out;
  }
  const uint64_t d_in = in >= bytes_received ? in - bytes_received : in;
  const uint64_t d_out = out >= bytes_sent ? out - bytes_sent : out;
  metrics->add_bytes(d_out, d_in);
  wire_bytes += d_in + d_out;
  bytes_received = in;
  bytes_sent = out;
}

TrainerReport Trainer::Impl::snapshot() {
  TrainerReport r;
  r.samples = samples;
  r.microbatches = microbatches;
  r.requests_retried = retried;
  r.microbatches_lost = lost;
  r.samples_recomputed = recomputed;
  for (const auto& s : stage_step) r.stage_steps.push_back(s.load());
  r.steps = *std::min_element(r.stage_steps.begin(), r.stage_steps.end());
  {
    swarm::MutexLock lk(peers_mu);
    r.peers_per_stage = peers_per_stage;
    account_bytes();
    r.wire_bytes = train_ended > 0 ? train_wire_bytes : wire_bytes;
  }
  r.wire_bytes_per_sample = r.samples > 0 ? static_cast<double>(r.wire_bytes) / static_cast<double>(r.samples) : 0;
  swarm::MutexLock lk(loss_mu);
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  r.loss_first = mean(first_losses);
  r.stage_compute_seconds = stage_compute;
  r.stage_wait_seconds = stage_wait;
  r.loss_last = mean(recent_losses);
  r.loss_ema = loss_ema;
  r.eval_loss = eval_loss;
  const double end = train_ended > 0 ? train_ended.load() : now_seconds();
  r.train_seconds = train_started > 0 ? end - train_started : 0;
  r.samples_per_second = r.train_seconds > 0 ? static_cast<double>(r.samples) / r.train_seconds : 0;
  r.finished = finished;
  r.progress = progress;
  const size_t stride = std::max<size_t>(1, curve.size() / 256);
  for (size_t i = 0; i < curve.size(); i += stride) r.loss_curve.push_back(curve[i]);
  return r;
}

Trainer::Trainer(TrainerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Trainer::~Trainer() = default;

void Trainer::Impl::background_pass(double& last_report, double& last_announce) {
  try {
    refresh_peers();
  } catch (const std::exception& e) {
    spdlog::warn("trainer {}: discovery failed: {}", opt.peer_id, e.what());
  }
  if (now_seconds() - last_announce >= opt.spec.timeouts.heartbeat_seconds) {
    try {
      announce();
    } catch (const std::exception& e) {
      spdlog::warn("trainer {}: heartbeat failed: {}", opt.peer_id, e.what());
    }
    last_announce = now_seconds();
  }
  if (now_seconds() - last_report >= 1.0 && train_started > 0) {
    swarm::MutexLock lk(loss_mu);
    if (progress.size() < 100000) progress.emplace_back(now_seconds() - train_started, samples.load());
  }
  if (!opt.report_path.empty() && now_seconds() - last_report >= 1.0) {
    try {
      write_atomically(opt.report_path, snapshot().to_json().dump());
    } catch (const std::exception& e) {
      spdlog::warn("trainer {}: {}", opt.peer_id, e.what());
    }
    last_report = now_seconds();
  }
}

bool Trainer::Impl::wait_for_peers(const std::atomic<bool>& stop) {
  const double wait_until = now_seconds() + opt.wait_for_peers_seconds;
  while (true) {
    bool all = true;
    {
      swarm::MutexLock lk(peers_mu);
      for (int n : peers_per_stage) all = all && n > 0;
    }
    if (all) return true;
    if (stop || now_seconds() > wait_until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Trainer::Impl::train(const std::atomic<bool>& stop) {
  train_started = now_seconds();
  const double deadline = opt.max_seconds > 0 ? train_started + opt.max_seconds : 0;
  std::atomic<uint64_t> seq{0};
  auto keep_going = [&] {
    return !stop && min_step() < opt.max_steps && (deadline == 0 || now_seconds() < deadline);
  };
  if (opt.gpipe) return train_gpipe(keep_going);
  std::vector<std::thread> lanes;
  for (int i = 0; i < opt.spec.trainers.inflight_microbatches; ++i) {
    lanes.emplace_back([&] {
      while (keep_going()) {
        try {
          run_microbatch(seq++);
        } catch (const std::exception& e) {
          lost++;
          spdlog::warn("trainer {}: microbatch lost: {}", opt.peer_id, e.what());
        }
      }
    });
  }
  for (auto& t : lanes) t.join();
  end_training();
}

// Training is over: the bytes it moved are counted before the eval batches add theirs.
void Trainer::Impl::end_training() {
  {
    swarm::MutexLock lk(peers_mu);
    account_bytes();
    train_wire_bytes = wire_bytes;
  }
  train_ended = now_seconds();
}

// After a flush every stage steps on the flushed samples: asks each stage until it reports that step
// (a reply carries the step it was computed at, so the last flush's step shows only in a later one).
void Trainer::Impl::await_stage_steps(int64_t target) {
  const double until = now_seconds() + opt.spec.timeouts.averaging_seconds;
  for (int s = 0; s < stages; ++s) {
    while (stage_step[s].load() < target && now_seconds() < until) {
      const auto peer = routers[s]->pick_peer(planner::Op::Forward, 1, now_seconds(), {});
      if (auto client = peer ? client_for(*peer) : nullptr) {
        try {
          note_step(s, client->call(make_message(net::Ping, nlohmann::json::object()), to_ms(1.0)));
        } catch (const std::exception&) {
        }
      }
      if (stage_step[s].load() < target) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

// GPipe: a step's global batch as microbatches all in flight at once (each stage's queue takes their
// forwards before their backwards), then a flush: the next step starts when every one is done, so
// each stage steps on exactly this step's samples. A lost microbatch ends the run.
void Trainer::Impl::train_gpipe(const std::function<bool()>& keep_going) {
  const int64_t per_step = opt.spec.training.global_batch / opt.spec.training.microbatch;
  uint64_t seq = 0;
  // Steps are counted here: a stage reports the step its last flush completed only in a later reply.
  for (int64_t step = min_step(); step < opt.max_steps && keep_going(); ++step) {
    std::vector<std::thread> microbatches;
    std::atomic<bool> failed{false};
    for (int64_t i = 0; i < per_step; ++i) {
      microbatches.emplace_back([this, &failed, s = seq++] {
        try {
          run_microbatch(s);
        } catch (const std::exception& e) {
          lost++;
          failed = true;
          spdlog::error("trainer {}: microbatch lost: {}", opt.peer_id, e.what());
        }
      });
    }
    for (auto& t : microbatches) t.join();
    if (!failed) await_stage_steps(step + 1);
    if (failed) {
      end_training();
      throw std::runtime_error("trainer " + opt.peer_id + ": gpipe lost a microbatch (no failover); stopping");
    }
  }
  end_training();
}

TrainerReport Trainer::run(const std::atomic<bool>& stop) {
  auto& I = *impl_;
  I.registry = std::make_unique<registry::RegistryClient>(I.opt.registry_url, to_ms(I.opt.spec.timeouts.connect_seconds),
                                                          I.opt.secret);
  I.metrics = std::make_unique<Metrics>(I.opt.metrics_bind, "trainer", I.opt.peer_id);
  std::atomic<bool> done{false};
  swarm::Mutex bg_mu;
  swarm::CondVar bg_cv;

  // Discovery and the progress report run beside the training loop.
  std::thread background([&] {
    double last_report = 0, last_announce = 0;
    while (!done) {
      I.background_pass(last_report, last_announce);
      swarm::MutexLock lk(bg_mu);
      bg_cv.wait_for(bg_mu, std::chrono::milliseconds(250), [&] { return done.load(); });
    }
  });
  auto finish = [&] {
    done = true;
    bg_cv.notify_all();
    if (background.joinable()) background.join();
  };

  if (!I.wait_for_peers(stop)) {
    finish();
    I.withdraw();
    throw std::runtime_error("trainer: not every stage has a live worker after " +
                             std::to_string(I.opt.wait_for_peers_seconds) + " s");
  }
  I.train(stop);
  I.withdraw();
  I.finished = I.min_step() >= I.opt.max_steps;
  if (!stop) {
    try {
      I.eval_loss = I.evaluate();
    } catch (const std::exception& e) {
      spdlog::warn("trainer {}: evaluation failed: {}", I.opt.peer_id, e.what());
    }
  }
  finish();
  auto report = I.snapshot();
  if (!I.opt.report_path.empty()) write_atomically(I.opt.report_path, report.to_json().dump());
  return report;
}

}  // namespace swarm::runtime
