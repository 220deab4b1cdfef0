// End of a step: the peers of a stage average their accumulated gradients, weighted by samples,
// and step their optimizers together, so every peer of a stage holds identical parameters.
//
// Protocol (per optimizer step of a stage, numbered by the step count):
//  1. Each peer reports its running sample count for the step to the StepCoordinator, which
//     latches "target reached" once the stage's live peers together passed the global batch.
//  2. A peer whose step is due (target reached, own outstanding backwards drained) joins the
//     step's group (stage, step, attempt). The group closes when every live worker of the stage
//     joined or after half the averaging timeout; its smallest peer id is the leader.
//  3. Members send their gradient sum to the leader (AveragePush); the leader adds all
//     contributions that arrive before the averaging deadline and answers every push with the
//     same sum and sample total. Everyone divides by the total and steps.
//  4. A member whose leader is unreachable or silent retries with attempt + 1 (the coordinator
//     forms a new group without the dead peer), so a peer dying mid-step cannot hang the others.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "worker/model/state.h"
#include "worker/runtime/protocol.h"
#include "worker/stage/stage_server_impl.h"
#include "worker/runtime/tensor_wire.h"

namespace swarm::runtime {
namespace {

constexpr int kMaxAttempts = 3;

// Calls `f` (a registry call) until the registry answers or `deadline` passes. A registry that
// is away for a moment (restarted) fails the call at once; three quick failures used to make the
// peer step without averaging. An HTTP error (the registry answered) is not retried.
template <typename F>
auto until_registry_answers(F&& f, double deadline) {
  while (true) {
    try {
      return f();
    } catch (const registry::RegistryError& e) {
      if (e.status() != 0 || now_seconds() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}


// Gradient of every parameter, zeros where a parameter got none this step.
torch::Tensor flat_gradients(model::StageModel& m) {
  std::vector<torch::Tensor> parts;
  for (auto& p : m.parameters()) {
    auto g = p.grad();
    parts.push_back(g.defined() ? g.detach().reshape({-1}).to(torch::kFloat32)
                                : torch::zeros({p.numel()}, torch::kFloat32));
  }
  return torch::cat(parts).cpu();
}

void set_gradients(model::StageModel& m, const torch::Tensor& flat) {
  int64_t offset = 0;
  for (auto& p : m.parameters()) {
    auto slice = flat.narrow(0, offset, p.numel()).view(p.sizes()).to(p.device(), p.scalar_type());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(slice);
    } else {
      p.mutable_grad() = slice.clone();
    }
    offset += p.numel();
  }
}

}  // namespace

bool StageServer::Impl::step_due_locked() const {
  // The stage's claims are complete (planner/step_book.h, Claims), this peer's part is done (no
  // activations owed a backward), and it holds no claim it has not used: an unused one goes back
  // with its next report, and the step may take another peer's work first.
  return step_full && activations.empty() && claimed <= claim_used && !handoff_now;
}

bool StageServer::Impl::report_claims(bool force) {
  swarm::MutexLock rk(report_mu);
  planner::ClaimRequest req;
  int64_t r;
  bool full, wanted;
  {
    swarm::MutexLock lk(mu);
    r = step.load();
    const Demand d = leaving ? Demand{} : queue.demand(activations.ids(r));
    req.done = samples_done;
    req.used = std::max(claim_used, samples_done);
    req.want = req.used + d.samples;
    req.unit = d.unit;
    req.transfers = d.transfers;
    // What is asked back goes back now: work taken from here on must fit what stays.
    claimed = std::min(claimed, req.want);
    wanted = claim_wanted && d.samples > 0;
    claim_wanted = false;
    full = step_full;
  }
  const bool same = r == last_claim_step && req.done == last_claim.done && req.used == last_claim.used &&
                    req.want == last_claim.want && req.transfers.size() == last_claim.transfers.size();
  // Unchanged: a full step needs no news (a peer that is due joins its group, which says whether
  // the step is still full); one that is not full is polled every interval for others' claims.
  // Work waiting for a claim asks again, every 100 ms, full step or not: a retry names a peer
  // killed a moment ago before the registry knows it is gone (its launcher withdraws it ~25 ms
  // after the kill), and the registry moves that peer's claim only once it does. Asked once, the
  // retry waited in the queue until the step closed without it, 4-20 samples short, 2 s after
  // each kill (StepAccounting.PreemptedPeersLeaveEveryStageAtTheTrainersGlobalBatches).
  const double since = now_seconds() - last_claim_at;
  if (same && !force && (since < 0.02 || (full && (!wanted || since < 0.1)))) return true;
  planner::ProgressView view;
  try {
    view = registry->claim(stage.load(), r, opt.peer_id, req, target_samples);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: progress report failed: {}", opt.peer_id, e.what());
    return false;
  }
  last_claim = req;
  last_claim_step = r;
  last_claim_at = now_seconds();
  bool wake = false;
  {
    swarm::MutexLock lk(mu);
    if (view.step == step.load()) {
      wake = view.granted > claimed || (view.target_reached && !step_full);
      claimed = view.granted;
      stage_claims = view.samples_total;
      step_full = view.target_reached;
      closing_since = step_full ? (closing_since > 0 ? closing_since : now_seconds()) : 0;
    }
  }
  if (wake) cv.notify_all();
  return true;
}

void StageServer::Impl::progress_loop() {
  // Short poll: a peer learns within this interval that others released claims or completed the
  // step; work waiting for a claim wakes it at once (claim_wanted).
  const auto interval = std::chrono::milliseconds(25);
  while (true) {
    {
      swarm::MutexLock lk(mu);
      cv.wait_for(mu, interval, [&]() REQUIRES(mu) { return stopping || claim_wanted; });
      if (stopping) return;
    }
    if (!ready) continue;
    // A registry restarted (or moved) lost what this peer reported: it could grant its claim to
    // another peer and close the step without its samples (it re-syncs, they are lost). So after a
    // failed heartbeat the report goes again until one gets through.
    const bool unsure = progress_unsure.exchange(false);
    if (!report_claims(unsure)) {
      if (unsure) progress_unsure = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

void StageServer::Impl::finish_step() {
  const double started = now_seconds();
  const int64_t r = step.load();
  fold_handoffs();
  int64_t samples;
  {
    swarm::MutexLock lk(mu);
    // A hand-off taken since the fold is in samples_done, not yet in the gradients: it goes into
    // the next step (advance_step keeps its samples).
    samples = samples_done - pending_handoff_samples_locked();
  }
  bool leaving_now;
  {
    swarm::MutexLock lk(mu);
    leaving_now = leaving;
  }
  try {
    // A leaving peer stays draining: no new work.
    announce(leaving_now ? std::nullopt : std::optional(planner::PeerState::Averaging));
  } catch (const std::exception&) {
  }
  auto flat = flat_gradients(*model);
  int members = 1;
  bool writer = false;
  const StepEnd end = average_step(r, leaving_now, flat, samples, members, writer);
  if (end == StepEnd::Abandoned) return;
  if (end == StepEnd::Reopened) {
    // Not this step's end after all: its gradient stays, and the peer admits work again.
    spdlog::debug("worker {}: step {}: back to admitting work (the step is not full, or retries wait)",
                  opt.peer_id, r);
    cv.notify_all();
    return;
  }
  // A leaving peer never steps alone: its update would leave with it; its gradient is handed off.
  if (end == StepEnd::Unaveraged && hand_off_instead("no averaging group formed for step " + std::to_string(r)))
    return;
  if (end == StepEnd::Unaveraged) {
    // No group could be formed (coordinator unreachable): step on the local gradients rather than
    // stall the pipeline; the heartbeat's behind-check re-syncs this peer if the others moved on.
    spdlog::error("worker {}: step {}: stepped without averaging", opt.peer_id, r);
    report_event("unaveraged_steps", 1);
    writer = true;
  }
  if (samples > 0) {
    set_gradients(*model, flat / static_cast<double>(samples));
    optimizer->step();
  } else {
    optimizer->zero_grad();
  }
  if (writer) count_step_samples(samples);
  advance_step(r);
  maybe_checkpoint(writer);
  metrics->observe_averaging(stage.load(), now_seconds() - started, members);
  metrics->set_optimizer_step(stage.load(), static_cast<double>(r + 1));
  metrics->set_learning_rate(stage.load(), optimizer->last_lr());
  cv.notify_all();
  spdlog::debug("worker {}: step {} done ({} samples, {} peers, {:.3f}s)", opt.peer_id, r + 1,
                samples, members, now_seconds() - started);
}

StageServer::Impl::StepEnd StageServer::Impl::average_step(int64_t r, bool leaving_now,
                                                           torch::Tensor& flat, int64_t& samples,
                                                           int& members, bool& writer) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto sum = flat;
    int64_t total = samples;
    StepOutcome outcome = StepOutcome::Failed;
    try {
      outcome = average_once(attempt, sum, total, members, writer);
    } catch (const std::exception& e) {
      spdlog::warn("worker {}: averaging step {} attempt {} failed: {}", opt.peer_id, r, attempt, e.what());
    }
    {
      swarm::MutexLock lk(mu);
      held_group.reset();
    }
    if (outcome == StepOutcome::Reopened) return StepEnd::Reopened;
    if (outcome == StepOutcome::Closed) {
      // The stage averaged this step without us (we were late): our gradient is stale now. A peer
      // that stays re-syncs (dropping it, counted); a leaving one hands it to a peer that stays,
      // a step stale (counted there as stale_handoffs_taken), rather than drop it on its way out.
      if (hand_off_instead("step " + std::to_string(r) + " closed without it")) return StepEnd::Abandoned;
      resync();
      return StepEnd::Abandoned;
    }
    const bool averaged = outcome == StepOutcome::Averaged;
    if (averaged) {
      if (leaving_now && samples > 0) {
        // Its way of handing off: the gradient went into the stage's average.
        spdlog::info("worker {}: leaving: its {} samples went into step {}'s average", opt.peer_id,
                     samples, r);
        report_event("handoffs", 1);
      }
      flat = sum;
      samples = total;
    }
    {
      swarm::MutexLock lk(mu);
      if (stopping) return StepEnd::Abandoned;
    }
    if (averaged) return StepEnd::Averaged;
  }
  return StepEnd::Unaveraged;
}

bool StageServer::Impl::hand_off_instead(const std::string& why) {
  swarm::MutexLock lk(mu);
  if (!leaving) return false;
  handoff_now = true;  // step_due_locked is false from now on: the compute loop completes the leave
  handoff_at = now_seconds();
  spdlog::info("worker {}: leaving: {}; handing its {} samples of gradient to a peer that stays", opt.peer_id, why,
               samples_done);
  cv.notify_all();
  return true;
}

void StageServer::Impl::count_step_samples(int64_t samples) {
  // Exact admission (planner/step_book.h, Claims): a step averages the global batch, less the
  // samples lost to a fault (counted where they are lost). Any other count is a defect or a
  // fault's trace: counted, so tests and the soak see it (tests/local/step_accounting_test.cc).
  if (samples < target_samples) {
    spdlog::info("worker {}: step {} averaged {} samples, {} short of the global batch", opt.peer_id,
                 step.load() + 1, samples, target_samples - samples);
    report_event("steps_short", 1);
    report_event("step_samples_short", target_samples - samples);
  } else if (samples > target_samples) {
    spdlog::warn("worker {}: step {} averaged {} samples, {} past the global batch", opt.peer_id,
                 step.load() + 1, samples, samples - target_samples);
    report_event("steps_over", 1);
    report_event("step_samples_over", samples - target_samples);
  }
}

void StageServer::Impl::advance_step(int64_t r) {
  {
    swarm::MutexLock lk(mu);
    step = r + 1;
    samples_done = pending_handoff_samples_locked();  // taken after this step's fold: the next step's
    claim_used = samples_done;  // a fact in the next step: its first report claims it
    claimed = 0;
    stage_claims = 0;
    step_full = false;
    closing_since = 0;
    fingerprint = model::param_fingerprint(*model);
  }
  // Then, mu released: the averaging state of steps more than two behind goes.
  inbox.prune(r);
}

StageServer::Impl::StepOutcome StageServer::Impl::average_once(int attempt, torch::Tensor& flat,
                                                               int64_t& samples, int& members,
                                                               bool& writer) {
  const int64_t r = step.load();
  const double timeout = opt.spec.timeouts.averaging_seconds;
  planner::Member self{opt.peer_id, opt.host, static_cast<int>(server->port()), samples};
  auto joined_group = [&](const planner::GroupView& g) {
    return std::any_of(g.members.begin(), g.members.end(),
                       [&](const planner::Member& m) { return m.peer_id == opt.peer_id; });
  };
  const double deadline = now_seconds() + timeout;
  auto join = [&] {
    return until_registry_answers([&] { return registry->join_step(stage.load(), r, attempt, self, timeout / 2); },
                                  deadline);
  };
  if (!join()) return StepOutcome::Closed;
  planner::GroupView group;
  auto poll = std::chrono::milliseconds(2);
  while (true) {
    group = until_registry_answers([&] { return registry->step_group(stage.load(), r, attempt); }, deadline);
    if (group.state == planner::GroupView::Ready) break;
    if (reopens(group)) return StepOutcome::Reopened;
    // A registry restarted since the join does not know this peer joined: join again there.
    // The group may be unknown to it, or gathering already (a peer of the stage joined the new
    // registry first); polled without joining, it would turn Ready without this peer.
    if (!joined_group(group) && !join()) return StepOutcome::Closed;
    if (now_seconds() > deadline) return StepOutcome::Failed;
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(50));
  }
  if (!joined_group(group)) return StepOutcome::Closed;
  {
    swarm::MutexLock lk(mu);
    held_group = HeldGroup{stage.load(), r, attempt, group.members};
  }
  members = static_cast<int>(group.members.size());
  writer = group.leader == opt.peer_id;  // the leader writes the stage's checkpoints
  if (members == 1) return StepOutcome::Averaged;
  const auto key = std::make_pair(r, attempt);
  if (group.leader == opt.peer_id) {
    std::vector<std::string> ids;
    for (const auto& m : group.members) ids.push_back(m.peer_id);
    const auto result = inbox.gather(key, ids, flat, samples, deadline);
    // A member that froze or died after the group turned Ready (the registry does not count it
    // lost then: the group holds it) never pushed: the step averages without its samples. The
    // leader is the one that knows: it counts them lost, once.
    int64_t expected = 0;
    for (const auto& m : group.members) expected += m.peer_id == opt.peer_id ? samples : m.samples;
    if (expected > result->samples) {
      spdlog::warn("worker {}: step {} averaged without {} samples of members that did not push", opt.peer_id, r,
                   expected - result->samples);
      report_event("samples_lost", expected - result->samples);
    }
    // What the members decode from the reply (encoding is deterministic), so every peer of the
    // stage steps with the same bytes whatever spec.averaging.compression is.
    flat = averaging_codec(opt.spec).compression == Compression::None
               ? result->average
               : decode_float(encode_float(result->average, averaging_codec(opt.spec), "average"), "average");
    samples = result->samples;
    members = result->members;
    return StepOutcome::Averaged;
  }
  const auto& leader = *std::find_if(group.members.begin(), group.members.end(),
                                     [&](const planner::Member& m) { return m.peer_id == group.leader; });
  net::Client client(leader.host, static_cast<uint16_t>(leader.port), opt.secret, client_options);
  auto push = make_message(net::AveragePush, {{"stage", stage.load()}, {"step", r}, {"attempt", attempt},
                                              {"samples", samples}, {"peer", opt.peer_id}});
  push.tensors.push_back(encode_float(flat, averaging_codec(opt.spec), "gradient"));
  auto reply = client.call(std::move(push), to_ms(std::max(1.0, deadline - now_seconds())));
  if (reply.type != net::AverageReply || reply.tensors.size() != 1)
    throw std::runtime_error("leader " + leader.peer_id + " sent an unexpected reply");
  auto meta = parse_meta(reply);
  auto sum = decode_float(reply.tensors[0], "leader's average");
  if (sum.numel() != flat.numel()) throw std::runtime_error("leader's gradient has the wrong size");
  flat = sum.clone();
  samples = meta_int(meta, "samples");
  members = static_cast<int>(meta_int(meta, "members"));
  return StepOutcome::Averaged;
}

bool StageServer::Impl::reopens(const planner::GroupView& g) {
  swarm::MutexLock lk(mu);
  if (!g.step_full) {
    // A claim went back (activations dropped, a forward expired): the step takes more work
    // before it closes, and this peer may be the one to admit it.
    step_full = false;
    closing_since = 0;
    return true;
  }
  if (leaving) return false;
  if (claimed > claim_used) {
    // Granted since it joined (a gone peer's claim moved here with a retry of its work): that
    // work is this step's, and the group waits for it (planner/step_book.h, Matchmaking).
    return true;
  }
  if (g.awaiting.empty()) return false;
  // Retries of a gone peer's owed work wait here: admitted under its claim, they finish this
  // step, as on the other stages (planner/step_book.h, Claims).
  for (const auto& t : queue.demand(activations.ids(step.load())).transfers)
    if (std::find(g.awaiting.begin(), g.awaiting.end(), t.from) != g.awaiting.end()) {
      claim_wanted = true;
      cv.notify_all();
      return true;
    }
  return false;
}

void StageServer::Impl::retell_group() {
  std::optional<HeldGroup> g;
  {
    swarm::MutexLock lk(mu);
    g = held_group;
  }
  if (!g) return;
  const auto view = registry->restore_group(g->stage, g->step, g->attempt, g->members);
  if (view.state == planner::GroupView::Ready && view.members.size() != g->members.size()) {
    // Decided anew by a registry that heard of it too late: the leader's gather tells who is in.
    spdlog::warn("worker {}: the registry holds step {} attempt {} with {} members, this peer averages with {}",
                 opt.peer_id, g->step, g->attempt, view.members.size(), g->members.size());
  }
}

net::Message StageServer::Impl::handle_average_push(net::Message&& request) {
  auto meta = parse_meta(request);
  const int64_t requested = meta_int(meta, "stage");
  if (requested != stage.load())
    throw std::invalid_argument("meta.stage: this worker serves stage " + std::to_string(stage.load()) +
                                ", got " + std::to_string(requested));
  const int64_t r = meta_int(meta, "step");
  const int attempt = static_cast<int>(meta_int(meta, "attempt"));
  const int64_t samples = meta_int(meta, "samples");
  if (samples < 0) throw std::invalid_argument("meta.samples: must be >= 0, got " + std::to_string(samples));
  if (request.tensors.size() != 1)
    throw std::invalid_argument("average: expected one gradient tensor, got " + std::to_string(request.tensors.size()));
  Contribution c{meta_string(meta, "peer"), samples, decode_float(request.tensors[0], "gradient")};
  // A push that arrives after the leader closed the step still gets the step's result, so the
  // late member steps with the same update as everyone else (its own gradient is then lost).
  const auto result = inbox.contribute(std::make_pair(r, attempt), std::move(c), r < step.load(),
                                       opt.spec.timeouts.averaging_seconds);
  auto reply = make_message(net::AverageReply, {{"samples", result->samples}, {"members", result->members}});
  reply.tensors.push_back(encode_float(result->average, averaging_codec(opt.spec), "average"));
  return reply;
}

}  // namespace swarm::runtime
