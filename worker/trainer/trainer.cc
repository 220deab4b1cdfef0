#include "worker/trainer/trainer.h"
#include "worker/trainer/trainer_impl.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <thread>

#include "common/atomic_file.h"
#include "common/thread_annotations.h"
#include "planner/stage_router.h"
#include "registry/registry_client.h"
#include "worker/data/text_dataset.h"
#include "worker/net/client.h"
#include "worker/runtime/metrics.h"
#include "worker/runtime/protocol.h"
#include "worker/runtime/clock.h"
#include "worker/runtime/tensor_wire.h"

namespace swarm::runtime {

nlohmann::json TrainerReport::to_json() const {
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& [s, l] : loss_curve) curve.push_back({s, l});
  nlohmann::json prog = nlohmann::json::array();
  for (const auto& [t, n] : progress) prog.push_back({t, n});
  return {{"steps", steps},
          {"samples", samples},
          {"microbatches", microbatches},
          {"microbatch_hops", microbatch_hops},
          {"cross_region_hops", cross_region_hops},
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
          {"data_wait_seconds", data_wait_seconds},
          {"data_wait_max_seconds", data_wait_max_seconds},
          {"finished", finished},
          {"loss_curve", curve},
          {"progress", prog}};
}


void Trainer::Impl::announce() {
  planner::PeerRecord rec;
  rec.peer_id = opt.peer_id;
  rec.role = "trainer";
  rec.stage = -1;
  rec.region = opt.region;
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
  std::vector<std::vector<planner::PeerCandidate>> ids(stages);
  std::vector<planner::StageCoverage> cover(stages);
  swarm::MutexLock lk(peers_mu);
  for (const auto& p : workers) {
    if (p.stage < 0 || p.stage >= stages) continue;
    // A pinned GPipe pipeline: this trainer's own worker of the stage, no other.
    if (!opt.gpipe_peers.empty() && opt.gpipe_peers[static_cast<size_t>(p.stage)] != p.peer_id) continue;
    planner::StageCoverage& c = cover[p.stage];
    const bool home = !planner::crosses_regions(opt.region, p.region);
    if (home && p.state == planner::PeerState::Joining) c.home_joining++;
    // Only peers that serve: not while joining (downloading state) or draining (leaving).
    if (!planner::routable(p.state)) continue;
    c.routable++;
    if (home) c.home_routable++;
    ids[p.stage].push_back({p.peer_id, p.region});
    peer_region[p.peer_id] = p.region;
    const std::string endpoint = p.host + ":" + std::to_string(p.port);
    auto it = clients.find(p.peer_id);
    if (it == clients.end() || it->second.first != endpoint)
      clients[p.peer_id] = {endpoint, std::make_shared<net::Client>(p.host, static_cast<uint16_t>(p.port),
                                                                    opt.secret, client_options)};
  }
  account_bytes();
  coverage = std::move(cover);
  const double now = now_seconds();
  for (int s = 0; s < stages; ++s) {
    routers[s]->set_candidates(ids[s], now);
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
  std::string last_failed;  // the peer that last failed this request: it may hold its work
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
      auto request = build(failover);
      // A retry names the peer that held its work: a stage takes over the claim a gone peer held
      // for it, so the microbatch counts once in the stage's step (planner/step_book.h, Claims).
      if (failover && !last_failed.empty()) {
        auto meta = parse_meta(request);
        meta["from"] = last_failed;
        request.meta = meta.dump();
      }
      auto reply = client->call(std::move(request), to_ms(timeout));
      const double dt = now_seconds() - t0;
      routers[stage]->report_success(*peer, op, samples, dt, now_seconds());
      metrics->observe_request(stage, op_label, dt, samples);
      const auto meta = parse_meta(reply);
      note_time(stage, meta, dt);
      note_step(stage, meta);
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
    last_failed = *peer;
  }
}

void Trainer::Impl::run_microbatch(uint64_t seq) {
  const int64_t B = opt.spec.training.microbatch, T = opt.spec.model.sequence_length;
  std::vector<int64_t> in, tg;
  const double asked = now_seconds();
  {
    swarm::MutexLock lk(sampler_mu);
    sampler.next(B, in, tg);
  }
  auto tokens = torch::from_blob(in.data(), {B, T}, torch::kInt64).clone();
  auto targets = torch::from_blob(tg.data(), {B, T}, torch::kInt64).clone();
  const double waited = now_seconds() - asked;
  const auto waited_ns = static_cast<int64_t>(waited * 1e9);
  data_wait_ns.fetch_add(waited_ns);
  int64_t longest = data_wait_max_ns.load();
  while (waited_ns > longest && !data_wait_max_ns.compare_exchange_weak(longest, waited_ns)) {
  }
  metrics->add_data_wait(waited);
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
  }, "", &fwd_peer[last]);
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
  metrics->add_completed_samples(B);
  count_hops(fwd_peer);
  metrics->set_loss(loss);
  swarm::MutexLock lk(loss_mu);
  const size_t per_batch = static_cast<size_t>(opt.spec.training.global_batch / B);
  if (first_losses.size() < per_batch) first_losses.push_back(loss);
  recent_losses.push_back(loss);
  if (recent_losses.size() > per_batch) recent_losses.erase(recent_losses.begin());
  loss_ema = curve.empty() ? loss : 0.9 * loss_ema + 0.1 * loss;
  if (curve.size() < 4096) curve.emplace_back(done, loss);
}

void Trainer::Impl::count_hops(const std::vector<std::string>& path) {
  int64_t crossed = 0;
  {
    swarm::MutexLock lk(peers_mu);
    // A peer never listed (none is: it was picked from the listing) would be in region "".
    std::string from = opt.region;
    for (const auto& peer : path) {
      auto it = peer_region.find(peer);
      const std::string to = it == peer_region.end() ? std::string() : it->second;
      crossed += planner::crosses_regions(from, to) ? 1 : 0;
      from = to;
    }
  }
  hops += static_cast<int64_t>(path.size());
  cross_region_hops += crossed;
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
  r.microbatch_hops = hops;
  r.cross_region_hops = cross_region_hops;
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
  r.data_wait_seconds = static_cast<double>(data_wait_ns.load()) / 1e9;
  r.data_wait_max_seconds = static_cast<double>(data_wait_max_ns.load()) / 1e9;
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
      write_file_atomically(opt.report_path, snapshot().to_json().dump());
    } catch (const std::exception& e) {
      spdlog::warn("trainer {}: {}", opt.peer_id, e.what());
    }
    last_report = now_seconds();
  }
}

bool Trainer::Impl::wait_for_peers(const std::atomic<bool>& stop) {
  const double started = now_seconds();
  const double wait_until = started + opt.wait_for_peers_seconds;
  while (true) {
    bool all = true;
    {
      // A home-region worker still joining is waited for a while: started at once, this
      // trainer's first microbatches would all cross regions (planner/stage_router.h).
      swarm::MutexLock lk(peers_mu);
      all = planner::may_start_routing(coverage, now_seconds() - started >= planner::kHomeJoinerGraceSeconds);
    }
    if (all) return true;
    if (stop || now_seconds() > wait_until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
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
  if (!I.opt.report_path.empty()) write_file_atomically(I.opt.report_path, report.to_json().dump());
  return report;
}

}  // namespace swarm::runtime
