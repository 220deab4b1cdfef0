// How a leaving worker gives the gradient it holds to its stage (stage_membership.cc, "Leave"):
// the sender (handoff_gradients) offers it to the stage's other peers until one takes it; the
// receiver (do_handoff) adds it to its own open step when it is of that step or at most
// kHandoffMaxLag steps older. A gradient nobody takes is counted as lost samples by the sender.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "worker/swarm/protocol.h"
#include "worker/swarm/stage_server_impl.h"
#include "worker/swarm/tensor_wire.h"

namespace swarm::runtime {
namespace {

constexpr int64_t kHandoffMaxLag = 4;  // steps a handed-off gradient may be behind its taker

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
      const double timeout = std::max(0.2, std::min(opt.spec.timeouts.backward_seconds, until - now_seconds()));
      try {
        net::Client client(p.host, static_cast<uint16_t>(p.port), opt.secret, client_options);
        auto m = make_message(kGradientHandoff, {{"stage", s}, {"step", mine}, {"samples", samples},
                                                 {"peer", opt.peer_id}});
        m.tensors.push_back(to_wire(flat));
        client.call(std::move(m), to_ms(timeout));
        spdlog::info("worker {}: handed {} samples of gradient of step {} to {}", opt.peer_id, samples, mine,
                     p.peer_id);
        report_event("handoffs", 1);
        return true;
      } catch (const net::RemoteError& e) {
        refused_closed = refused_closed || e.code() == net::ErrorCode::StepClosed;
        spdlog::warn("worker {}: hand-off to {} refused: {}", opt.peer_id, p.peer_id, e.what());
      } catch (const std::exception& e) {
        spdlog::warn("worker {}: hand-off to {} failed: {}", opt.peer_id, p.peer_id, e.what());
      }
    }
    // Every taker is too far ahead for this gradient: no later try helps.
    if (refused_closed && std::none_of(peers.begin(), peers.end(), [&](const auto& p) {
          return p.peer_id != opt.peer_id && serving(p) && p.step >= mine && p.step <= mine + kHandoffMaxLag;
        }))
      break;
  }
  spdlog::warn("worker {}: no peer of stage {} took its {} samples of gradient of step {}", opt.peer_id, s,
               samples, mine);
  return false;
}

net::Message StageServer::Impl::do_handoff(Task& task) {
  const auto& m = task.request;
  const int64_t r = meta_int(task.meta, "step");
  const int64_t samples = meta_int(task.meta, "samples");
  if (samples < 1) throw std::invalid_argument("meta.samples: must be >= 1, got " + std::to_string(samples));
  if (m.tensors.size() != 1 || m.tensors[0].dtype != net::DType::Float32)
    throw std::invalid_argument("handoff: expected one float32 gradient tensor");
  // A gradient of this step, or of one a few steps back: a peer that drains in-flight requests under
  // load can find the stage a step or three ahead when its turn to hand off comes. Added to this
  // step, a few optimizer steps stale (as in asynchronous SGD), it is used rather than lost.
  if (r > step.load() || r < step.load() - kHandoffMaxLag) throw net::CodedError(net::ErrorCode::StepClosed, kStepClosed);
  // A peer that is leaving itself cannot keep a gradient: the sender tries another peer.
  if (is_leaving()) throw std::runtime_error("peer is leaving stage " + std::to_string(stage.load()));
  auto flat = from_wire(m.tensors[0]);
  int64_t offset = 0, total = 0;
  for (auto& p : model->parameters()) total += p.numel();
  if (flat.numel() != total)
    throw std::invalid_argument("handoff: gradient has " + std::to_string(flat.numel()) + " values, stage has " +
                                std::to_string(total));
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    auto slice = flat.narrow(0, offset, p.numel()).view(p.sizes()).to(p.device(), p.scalar_type());
    if (p.grad().defined()) p.mutable_grad().add_(slice);
    else p.mutable_grad() = slice.clone();
    offset += p.numel();
  }
  {
    swarm::MutexLock lk(mu);
    samples_done += samples;
  }
  return make_message(kHandoffReply, {{"accepted", true}, {"step", r}});
}

}  // namespace swarm::runtime
