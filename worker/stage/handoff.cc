// How a leaving worker gives the gradient it holds to its stage (worker/stage/membership.cc, "Leave"):
// the sender (handoff_gradients) offers it to the stage's other peers until one takes it; the
// receiver (handle_handoff, on its connection thread) takes it into its open step when it is of
// that step or at most spec.averaging.maxHandoffLagSteps older, and the compute thread adds it to
// the gradients before the step averages (fold_handoffs). A gradient nobody takes is counted as
// lost samples by the sender; one whose answer never came (it may have been taken) as
// handoff_samples_unconfirmed, and never offered to a second peer (it would be applied twice).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "worker/runtime/protocol.h"
#include "worker/stage/stage_server_impl.h"
#include "worker/runtime/tensor_wire.h"

namespace swarm::runtime {
namespace {

bool serving(const planner::PeerRecord& p) { return planner::routable(p.state); }

torch::Tensor flat_grads(model::StageModel& m) {
  std::vector<torch::Tensor> parts;
  for (auto& p : m.parameters()) {
    auto g = p.grad();
    parts.push_back(g.defined() ? g.detach().reshape({-1}).to(torch::kFloat32).cpu()
                                : torch::zeros({p.numel()}, torch::kFloat32));
  }
  return torch::cat(parts);
}

}  // namespace

bool StageServer::Impl::handoff_gradients() {
  fold_handoffs();  // what others handed to this peer leaves with its own gradient
  int64_t samples;
  double ends;
  {
    swarm::MutexLock lk(mu);
    samples = samples_done;
    ends = drain_ends;  // drain() sets it from another thread
  }
  if (samples == 0) return true;
  const int s = stage.load();
  const int64_t mine = step.load();
  const auto flat = flat_grads(*model);
  // Within what is left of a drain's budget (the process must exit before it is killed), and at
  // most kHandoffPatience: without a drain (a rebalancer move) within one backward timeout.
  constexpr double kHandoffPatience = 5;
  const double started = now_seconds();
  const double until = std::min(started + kHandoffPatience,
                                ends > 0 ? ends - 0.3 : started + opt.spec.timeouts.backward_seconds);
  // Every serving peer of the stage is a candidate, those listed at this peer's step first: a
  // listing can be a heartbeat old (a peer that just stepped, or just joined), so the receiver,
  // not the listing, decides whether the step is still open (it refuses a closed one). A round
  // without a taker is tried again while a peer of the stage is joining (a replacement downloading
  // the state has a taker moments later); a registry that does not answer, only for a moment;
  // with every other peer of the stage gone or leaving (the job ends), not at all.
  for (int round = 0; now_seconds() < until; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    std::vector<planner::PeerRecord> peers;
    try {
      peers = registry->peers("worker", s);
    } catch (const std::exception& e) {
      spdlog::warn("worker {}: hand-off: registry unreachable: {}", opt.peer_id, e.what());
      if (now_seconds() - started > 1.0) break;
      continue;
    }
    if (std::none_of(peers.begin(), peers.end(), [&](const auto& p) {
          return p.peer_id != opt.peer_id && (serving(p) || p.state == planner::PeerState::Joining);
        }))
      break;
    std::stable_partition(peers.begin(), peers.end(), [&](const auto& p) { return p.step == mine; });
    bool refused_closed = false;
    for (const auto& p : peers) {
      if (p.peer_id == opt.peer_id || !serving(p)) continue;
      const double timeout = std::max(0.5, std::min(opt.spec.timeouts.backward_seconds, until - now_seconds()));
      const Offer offer = offer_handoff(p, flat, mine, samples, timeout);
      if (offer == Offer::Taken || offer == Offer::Unconfirmed) return true;
      refused_closed = refused_closed || offer == Offer::StepClosed;
    }
    // Every taker is too far ahead for this gradient: no later try helps.
    if (refused_closed && std::none_of(peers.begin(), peers.end(), [&](const auto& p) {
          return p.peer_id != opt.peer_id && serving(p) && p.step >= mine && p.step <= mine + max_handoff_lag;
        }))
      break;
  }
  spdlog::warn("worker {}: no peer of stage {} took its {} samples of gradient of step {}", opt.peer_id, s,
               samples, mine);
  return false;
}

StageServer::Impl::Offer StageServer::Impl::offer_handoff(const planner::PeerRecord& p, const torch::Tensor& flat,
                                                           int64_t mine, int64_t samples, double timeout) {
  try {
    net::Client client(p.host, static_cast<uint16_t>(p.port), opt.secret, client_options);
    auto m = make_message(kGradientHandoff,
                          {{"stage", stage.load()}, {"step", mine}, {"samples", samples}, {"peer", opt.peer_id}});
    m.tensors.push_back(to_wire(flat));
    client.call(std::move(m), to_ms(timeout));
    spdlog::info("worker {}: handed {} samples of gradient of step {} to {}", opt.peer_id, samples, mine, p.peer_id);
    report_event("handoffs", 1);
    return Offer::Taken;
  } catch (const net::RemoteError& e) {
    spdlog::warn("worker {}: hand-off to {} refused: {}", opt.peer_id, p.peer_id, e.what());
    return e.code() == net::ErrorCode::StepClosed ? Offer::StepClosed : Offer::Refused;
  } catch (const net::NetError& e) {
    if (e.request_sent()) {
      // Sent, and no answer: the peer may have taken it. Offered to another it could be applied
      // twice; so it is counted as unconfirmed, neither lost nor handed off.
      spdlog::error("worker {}: hand-off of {} samples to {} unconfirmed: {}", opt.peer_id, samples, p.peer_id,
                    e.what());
      report_event("handoff_samples_unconfirmed", samples);
      return Offer::Unconfirmed;
    }
    spdlog::warn("worker {}: hand-off to {} failed before it was sent: {}", opt.peer_id, p.peer_id, e.what());
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: hand-off to {} failed: {}", opt.peer_id, p.peer_id, e.what());
  }
  return Offer::Refused;
}

net::Message StageServer::Impl::handle_handoff(net::Message&& request) {
  // On the connection thread, not queued behind the compute thread: a receiver in the middle of
  // averaging (seconds, under load) would keep the sender past its drain budget, and a sender
  // that gave up while its gradient still waited in the queue counted it lost, then it was added
  // all the same. Taken here, it is in this peer's step the moment the reply goes out.
  const auto meta = parse_meta(request);
  const int64_t r = meta_int(meta, "step");
  const int64_t samples = meta_int(meta, "samples");
  const int64_t requested = meta_int(meta, "stage");
  if (samples < 1) throw std::invalid_argument("meta.samples: must be >= 1, got " + std::to_string(samples));
  if (request.tensors.size() != 1 || request.tensors[0].dtype != net::DType::Float32)
    throw std::invalid_argument("handoff: expected one float32 gradient tensor");
  const std::string from = meta_string(meta, "peer");
  auto flat = from_wire(request.tensors[0]);  // keeps the received buffer alive, no copy
  take_handoff(r, samples, requested, from, flat);
  // The sender's claim comes with its gradient: claimed here before the answer goes, so the
  // sender's report that drops its claim can never make room for samples the step holds already
  // (planner/step_book.h, Claims). A report that fails leaves the step a hand-off too full at worst.
  if (!report_claims(/*force=*/true))
    spdlog::warn("worker {}: could not claim {}'s {} handed-off samples with the registry", opt.peer_id, from, samples);
  return make_message(kHandoffReply, {{"accepted", true}, {"step", r}});
}

void StageServer::Impl::take_handoff(int64_t r, int64_t samples, int64_t requested, const std::string& from,
                                     const torch::Tensor& flat) {
  swarm::MutexLock lk(mu);
  if (requested != stage.load())
    throw std::invalid_argument("meta.stage: this worker serves stage " + std::to_string(stage.load()) +
                                ", got " + std::to_string(requested));
  if (!ready || failed) throw std::runtime_error("peer is not serving its stage");
  // A peer that is leaving itself cannot keep a gradient: the sender tries another peer.
  if (leaving || stopping) throw std::runtime_error("peer is leaving stage " + std::to_string(stage.load()));
  // A gradient of this step, or of one at most spec.averaging.maxHandoffLagSteps back: a peer
  // that drains under load can find the stage a step or three ahead when its turn to hand off
  // comes. Added to this step, a few optimizer steps stale (as in asynchronous SGD), it is used
  // rather than lost; the lag is counted where the gradient is folded in (fold_handoffs).
  const int64_t now_step = step.load();
  if (r > now_step || r < now_step - max_handoff_lag) throw net::CodedError(net::ErrorCode::StepClosed, kStepClosed);
  if (flat.numel() != stage_param_count)
    throw std::invalid_argument("handoff: gradient has " + std::to_string(flat.numel()) + " values, stage has " +
                                std::to_string(stage_param_count));
  pending_handoffs.push_back(PendingHandoff{r, samples, from, flat});
  samples_done += samples;  // the stage's count has them now
  claim_used += samples;    // a fact: its claim, whatever this peer was granted
  cv.notify_all();
}

void StageServer::Impl::fold_handoffs() {
  std::vector<PendingHandoff> taken;
  int64_t now_step;
  {
    swarm::MutexLock lk(mu);
    taken.swap(pending_handoffs);
    now_step = step.load();
  }
  if (taken.empty()) return;
  torch::NoGradGuard no_grad;
  for (const auto& h : taken) {
    int64_t offset = 0;
    for (auto& p : model->parameters()) {
      auto slice = h.flat.narrow(0, offset, p.numel()).view(p.sizes()).to(p.device(), p.scalar_type());
      if (p.grad().defined()) p.mutable_grad().add_(slice);
      else p.mutable_grad() = slice.clone();
      offset += p.numel();
    }
    // The only gradient a step may apply that was not computed on the parameters it updates:
    // counted here, where it happens (swarm_worker_events_total on /metrics, the registry's
    // stale_handoffs_taken), with its lag in the log.
    if (const int64_t lag = now_step - h.step; lag > 0) {
      spdlog::info("worker {}: took {} samples of {}'s gradient of step {} into step {} ({} steps stale)", opt.peer_id,
                   h.samples, h.from, h.step, now_step, lag);
      report_event("stale_handoffs_taken", 1);
      report_event("stale_handoff_samples", h.samples);
    }
  }
}

int64_t StageServer::Impl::pending_handoff_samples_locked() const {
  int64_t samples = 0;
  for (const auto& h : pending_handoffs) samples += h.samples;
  return samples;
}

}  // namespace swarm::runtime
