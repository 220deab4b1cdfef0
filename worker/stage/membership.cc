// How a worker enters, keeps up with and leaves a stage.
//
//  * Join: a new peer (or one the rebalancer moved) builds the stage's model and downloads the
//    parameters AND optimizer state of a live peer of the stage (donor chosen by
//    planner::choose_donor, so joiners spread over donors). With no live peer it restores the
//    stage's latest checkpoint; with neither it starts from the seed, or from spec.model.init's
//    Hugging Face checkpoint (and says so loudly).
//    While joining it announces "joining": trainers do not route to it and averaging steps do
//    not wait for it.
//  * Behind: a peer that finds its stage's averaging step closed without it, or sees a peer of
//    its stage two or more steps ahead, drops its local gradients (counted as lost samples: a
//    peer never applies its own gradient of a closed step) and downloads the current state again.
//    The one stale gradient a step may apply is a hand-off (handoff.cc), counted where taken.
//  * Leave (moved by the rebalancer, or SIGTERM): refuse new forwards, finish the backwards it
//    owes, hand its accumulated gradient to a peer that stays, then move or exit. The last peer of
//    a stage writes a checkpoint instead, when checkpoints are configured.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "planner/rebalance.h"
#include "worker/model/state.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/runtime/job_model.h"
#include "worker/runtime/protocol.h"
#include "worker/stage/stage_server_impl.h"
#include "worker/runtime/tensor_wire.h"

namespace swarm::runtime {
namespace {

bool serving(const planner::PeerRecord& p) { return planner::routable(p.state); }

// Whether a peer other than `self` serves stage `s`. A registry that cannot be reached says
// nothing about the stage: Unknown, never "no other peer" (a draining peer that took it for
// that skipped its step's wait and handed off nothing, as if it were the last).
enum class OthersServe { Yes, No, Unknown };
OthersServe others_serve(registry::RegistryClient& reg, const std::string& self, int s) {
  try {
    for (const auto& p : reg.peers("worker", s))
      if (p.peer_id != self && serving(p)) return OthersServe::Yes;
    return OthersServe::No;
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: cannot list stage {}'s peers: {}", self, s, e.what());
    return OthersServe::Unknown;
  }
}

}  // namespace

void StageServer::Impl::report_event(const std::string& kind, int64_t count) {
  if (count <= 0) return;
  metrics->add_event(kind, count);
  events.add(kind, count);
  flush_events();
}

bool StageServer::Impl::flush_events() {
  return events.flush([&](const registry::LedgerEntry& e) {
    try {
      registry->add_event(e, opt.peer_id);
    } catch (const std::exception& err) {
      spdlog::warn("worker {}: could not report {} {} yet (kept, sent again): {}", opt.peer_id, e.count, e.kind,
                   err.what());
      throw;
    }
  });
}

void StageServer::Impl::report_dropped(int s, int64_t r, int64_t lost) {
  if (lost <= 0) return;
  // One call clears this peer's report of the stale step (the registry must not count it again
  // should this peer die later) and counts the samples lost, unless the registry already did when
  // this peer expired (it was frozen).
  try {
    registry->report_dropped(s, r, opt.peer_id, target_samples, lost);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: could not report {} dropped samples: {}", opt.peer_id, lost, e.what());
  }
}

void StageServer::Impl::become_stage(int s, const char* why) {
  ready = false;
  stage = s;
  model = model::make_stage(model_cfg, s, stage_seed(opt.spec));
  model->to(device);
  optimizer = std::make_unique<model::StageOptimizer>(*model, optimizer_config(opt.spec));
  int64_t values = 0;
  for (const auto& p : model->parameters()) values += p.numel();
  {
    swarm::MutexLock lk(mu);
    stage_param_count = values;
    pending_handoffs.clear();  // none: a peer that leaves refuses hand-offs, and it folded its own
    step = 0;
    samples_done = claim_used = claimed = stage_claims = 0;
    activations.clear();
    step_full = false;
    closing_since = 0;
    leaving = false;
    handoff_now = false;
  }
  try {
    announce(planner::PeerState::Joining);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: could not announce: {}", opt.peer_id, e.what());
  }
  // No live peer and no checkpoint: the stage's parameters would restart from initialization.
  // That is right only while the stage never stepped (its initial parameters, from the seed, are
  // then all its state; the stage may be a step behind the others: stages step about together,
  // each when it has seen the global batch). Once it stepped (the registry's newest step of the
  // stage is past 0), training on would pair a reset stage with trained ones: the job stops
  // instead (issue 11).
  int64_t own = 0;
  switch (sync_on_join(s, own)) {
    case JoinSync::Synced: break;
    case JoinSync::Stopping: return;
    case JoinSync::Lost: fail_stage_reset(s, std::max(own, job_step())); return;
    case JoinSync::Fresh:
      if (opt.spec.model.init) {
        // spec.model.init: the initial parameters are the checkpoint's, this stage's tensors only
        // (checked against the spec before the worker started: check_model_init).
        load_model_init(opt.spec, *model);
        spdlog::info("worker {}: stage {} starts from {} (it never stepped)", opt.peer_id, s, opt.spec.model.init->from);
      } else {
        spdlog::info("worker {}: stage {} starts from its initial parameters (it never stepped)", opt.peer_id, s);
      }
      break;
  }
  fingerprint = model::param_fingerprint(*model);
  metrics->set_optimizer_step(s, static_cast<double>(step.load()));
  learn_step_progress();
  ready = true;
  try {
    announce();
  } catch (const std::exception&) {
  }
  spdlog::info("worker {}: serving stage {} from step {} ({})", opt.peer_id, s, step.load(), why);
}

StageServer::Impl::JoinSync StageServer::Impl::sync_on_join(int s, int64_t& at_step) {
  const double grace = 2 * opt.spec.timeouts.peer_expiry_seconds;
  double lost_since = -1;  // when the registry first said: stepped, and nobody to sync from
  for (;;) {
    bool listed = false;
    if (sync_state(s, 0, true, &listed)) return JoinSync::Synced;
    at_step = listed ? stage_newest_step(s) : -1;
    if (at_step == 0) return JoinSync::Fresh;
    if (at_step > 0) {
      const double now = now_seconds();
      if (lost_since < 0) lost_since = now;
      if (now - lost_since >= grace) return JoinSync::Lost;
    }
    swarm::MutexLock lk(mu);
    cv.wait_for(mu, std::chrono::milliseconds(500), [&]() REQUIRES(mu) { return stopping; });
    if (stopping) return JoinSync::Stopping;
  }
}

int64_t StageServer::Impl::job_step() {
  int64_t newest = 0;
  try {
    auto st = registry->stats();
    if (st.contains("stageSteps") && st["stageSteps"].is_object())
      for (const auto& [k, v] : st["stageSteps"].items())
        if (v.is_number_integer()) newest = std::max(newest, v.get<int64_t>());
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: cannot read the job's progress: {}", opt.peer_id, e.what());
  }
  return newest;
}

int64_t StageServer::Impl::stage_newest_step(int s) {
  try {
    auto st = registry->stats();
    const auto key = std::to_string(s);
    if (!st.contains("stageSteps") || !st["stageSteps"].is_object() || !st["stageSteps"].contains(key))
      return 0;  // the registry has seen no step of the stage
    return st["stageSteps"][key].get<int64_t>();
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: cannot read stage {}'s progress: {}", opt.peer_id, s, e.what());
  }
  return -1;
}

void StageServer::Impl::fail_stage_reset(int s, int64_t at_step) {
  const std::string message =
      "stage " + std::to_string(s) + " lost its state at step " + std::to_string(at_step) +
      ": it has no live peer and " + why_no_checkpoint(s) +
      ", so it would restart from its initial parameters while the other stages keep their trained ones. The job "
      "stops.";
  spdlog::error("worker {}: {}", opt.peer_id, message);
  {
    swarm::MutexLock lk(mu);
    failed = true;
    failure_message = message;
    failure_stage = s;
    failure_step = at_step;
  }
  ready = false;
  metrics->add_stage_reset();
  report_failure();
}

void StageServer::Impl::report_failure() {
  std::string message;
  int s;
  int64_t at_step;
  {
    swarm::MutexLock lk(mu);
    // One report at a time: the heartbeat thread retries while the joining thread reports, and
    // two reports in flight counted the failure twice in the registry (a CI run: 3 for 2).
    if (!failed || failure_reported || failure_reporting) return;
    failure_reporting = true;
    message = failure_message;
    s = failure_stage;
    at_step = failure_step;
  }
  bool reported = false;
  try {
    registry->report_failure("StageReset", s, at_step, message);
    reported = true;
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: could not report the failure: {}", opt.peer_id, e.what());
  }
  {
    swarm::MutexLock lk(mu);
    failure_reporting = false;
    if (reported) failure_reported = true;  // else the heartbeat tries again
  }
  try {
    announce(planner::PeerState::Failed);
  } catch (const std::exception&) {
  }
}

int64_t StageServer::Impl::align_with_swarm(int s) {
  int64_t ahead = 0;
  try {
    for (const auto& p : registry->peers("worker"))
      if (p.stage != s && serving(p)) ahead = std::max(ahead, p.step);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: cannot read the swarm's step: {}", opt.peer_id, e.what());
  }
  if (ahead > step.load()) {
    step = ahead;
    optimizer->set_step_count(ahead);
  }
  return ahead;
}

bool StageServer::Impl::sync_state(int s, int64_t min_step, bool checkpoints, bool* listed) {
  if (download_state_from_peers(s, min_step, listed)) return true;
  if (!checkpoints || opt.spec.checkpoint.path.empty()) return false;
  return restore_from_checkpoints(s, min_step, listed);
}

bool StageServer::Impl::download_state_from_peers(int s, int64_t min_step, bool* listed) {
  std::vector<planner::PeerLoad> loads;
  std::map<std::string, planner::PeerRecord> by_id;
  if (listed) *listed = false;
  try {
    for (const auto& p : registry->peers("worker", s)) {
      if (p.peer_id == opt.peer_id || !serving(p) || p.step < min_step) continue;
      loads.push_back({p.peer_id, p.stage, static_cast<double>(p.queue_length), p.samples_per_second, false});
      by_id[p.peer_id] = p;
    }
    if (listed) *listed = true;
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: cannot list stage {}'s peers: {}", opt.peer_id, s, e.what());
  }
  std::map<std::string, int> tried;
  while (!loads.empty()) {
    auto donor_id = planner::choose_donor(loads, opt.peer_id, tried);
    if (!donor_id) break;
    const auto& donor = by_id[*donor_id];
    try {
      net::Client client(donor.host, static_cast<uint16_t>(donor.port), opt.secret, client_options);
      auto reply = client.call(make_message(net::StateRequest, {{"stage", s}}),
                               to_ms(opt.spec.timeouts.averaging_seconds));
      if (reply.type != net::StateReply || reply.tensors.size() != 1)
        throw std::runtime_error("unexpected reply to a state request");
      const auto& w = reply.tensors[0];
      model::load_state(std::string(reinterpret_cast<const char*>(w.data), w.nbytes), *model, *optimizer);
      step = meta_int(parse_meta(reply), "step");
      spdlog::info("worker {}: downloaded stage {} step {} from {} ({} bytes)", opt.peer_id, s, step.load(),
                   donor.peer_id, w.nbytes);
      report_event("state_downloads", 1);
      return true;
    } catch (const std::exception& e) {
      spdlog::warn("worker {}: state download from {} failed: {}", opt.peer_id, donor.peer_id, e.what());
      loads.erase(std::remove_if(loads.begin(), loads.end(),
                                 [&](const planner::PeerLoad& l) { return l.peer_id == *donor_id; }),
                  loads.end());
    }
  }
  return false;
}

bool StageServer::Impl::restore_from_checkpoints(int s, int64_t min_step, bool* listed) {
  std::vector<CheckpointFile> found;
  try {
    found = list_checkpoints(CheckpointLocation(opt.spec.checkpoint), s);
  } catch (const std::exception& e) {
    // Storage that does not answer is not "no checkpoint": the joiner asks again (sync_on_join
    // treats it as an unanswered listing) instead of stopping the job.
    spdlog::error("worker {}: cannot list stage {}'s checkpoints: {}", opt.peer_id, s, e.what());
    report_event("checkpoint_failures", 1);
    if (listed != nullptr) *listed = false;
    return false;
  }
  const auto mine = own_key_ids();
  std::vector<std::string> foreign, refused;
  for (const auto& ckpt : found) {
    // A peer re-syncing holds the state of step min_step - 1: an older checkpoint would only
    // throw steps away.
    if (ckpt.step < min_step) break;
    if (written_by_another(ckpt, mine)) {  // another job instance's: not tried, never removed
      foreign.push_back(ckpt.path);
      continue;
    }
    try {
      model::load_state(open_checkpoint_of_job(ckpt, s), *model, *optimizer);
      step = ckpt.step;
      spdlog::warn("worker {}: stage {} restored from checkpoint {} (step {})", opt.peer_id, s, ckpt.path,
                   ckpt.step);
      report_event("checkpoint_restores", 1);
      // Work lost with the stage: how far the rest of the swarm got past the checkpoint. The
      // stage takes up the swarm's step number (and learning-rate schedule) from there on.
      const int64_t ahead = align_with_swarm(s);
      report_event("checkpoint_steps_lost", std::max<int64_t>(0, ahead - ckpt.step));
      note_unusable_checkpoints(s, foreign, refused);
      return true;
    } catch (const ForeignCheckpoint&) {
      foreign.push_back(ckpt.path);  // its key id, read from the object: another instance's
    } catch (const std::exception& e) {
      refused.push_back(ckpt.path + " refused: " + e.what());
    }
  }
  note_unusable_checkpoints(s, foreign, refused);
  return false;
}

void StageServer::Impl::check_behind(const std::vector<planner::PeerRecord>& stage_peers) {
  // A leaving peer keeps its gradient for the hand-off (a taker accepts one a few steps old)
  // instead of dropping it in a re-sync it would not serve from anyway.
  if (is_leaving()) return;
  const int64_t mine = step.load();
  for (const auto& p : stage_peers) {
    if (p.peer_id != opt.peer_id && serving(p) && p.step >= mine + 2) {
      spdlog::warn("worker {}: {} is at step {}, this peer at {}: re-syncing", opt.peer_id, p.peer_id, p.step, mine);
      resync_requested = true;
      cv.notify_all();
      return;
    }
  }
}

void StageServer::Impl::resync() {
  int64_t lost = 0;
  {
    swarm::MutexLock lk(mu);
    lost = samples_done;  // handed-in samples not folded yet included: they go with the rest
    pending_handoffs.clear();
    samples_done = claim_used = claimed = stage_claims = 0;
    activations.clear();
    step_full = false;
    closing_since = 0;
  }
  optimizer->zero_grad();
  ready = false;
  try {
    announce(planner::PeerState::Joining);
  } catch (const std::exception&) {
  }
  const int s = stage.load();
  const int64_t before = step.load();
  // A donor at this peer's own step will do (it holds the same state); a checkpoint of it will
  // not: restored, it would leave the peer where it is.
  if (!sync_state(s, before + 1) && !sync_state(s, before, /*checkpoints=*/false)) {
    // No live peer and no checkpoint is ahead of this peer: its state is the newest of the stage
    // that survives (the peers that went on without it are gone, e.g. it was frozen and they were
    // killed). Its step is finished in the registry, though; retrying it was refused again and
    // again, every 25 ms, for good (issue 11). It keeps its parameters and takes up a step number
    // the registry has not finished: the stage's newest, or the one after it when that one closed
    // without it too; the steps in between are lost to the stage.
    const int64_t newest = stage_newest_step(s);
    int64_t target = std::max(newest, align_with_swarm(s));
    if (target <= before) target = before + 1;
    if (before == 0 && newest > 0) {
      // It never stepped: its parameters are the initial ones, the stage's trained state is gone.
      fail_stage_reset(s, target);
      report_event("resyncs", 1);
      report_dropped(s, before, lost);
      return;
    }
    step = target;
    optimizer->set_step_count(target);
    spdlog::warn("worker {}: stage {} has no peer or checkpoint ahead of step {}: this peer's state is the "
                 "newest left; it goes on from step {} ({} steps of the stage lost)",
                 opt.peer_id, s, before, target, target - before);
    report_event("stage_steps_lost", target - before);
  }
  fingerprint = model::param_fingerprint(*model);
  // Last line of defence against a hot loop: a re-sync that ends where the previous one ended
  // waits a moment before the peer serves (and may fall behind) again.
  if (step.load() == last_resync_step) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  last_resync_step = step.load();
  learn_step_progress();
  ready = true;
  report_event("resyncs", 1);
  report_dropped(s, before, lost);
  spdlog::info("worker {}: re-synced stage {} from step {} to {} ({} local samples dropped)", opt.peer_id, s,
               before, step.load(), lost);
  cv.notify_all();
}

void StageServer::Impl::learn_step_progress() {
  // A peer that just took a donor's state at step r may find r closing: the donor gave its
  // state after the stage's claims were complete, before it averaged. Asked first, the registry
  // says so; the peer admits nothing into r (it holds no claim there, and none is left), and
  // averages with no samples or re-syncs with none to drop (a clean-clone CI run lost 4 samples
  // on a reclaim when a peer admitted work into a step closing without it).
  if (!report_claims(/*force=*/true))
    spdlog::warn("worker {}: cannot read step {}'s progress before serving", opt.peer_id, step.load());
}

int64_t StageServer::Impl::max_steps() const {
  return opt.max_steps > 0 ? opt.max_steps : opt.spec.training.max_steps;
}

void StageServer::Impl::complete_leave() {
  const int from = stage.load();
  int64_t lost = 0;
  {
    swarm::MutexLock lk(mu);
    // Forwards whose backward never came are not gradient: their trainers recompute them on
    // another peer of the stage (or dropped the microbatch and count it themselves), so they are
    // not lost samples.
    if (const int64_t owed = activations.clear(); owed > 0) {
      spdlog::info("worker {}: leaving with {} samples of forwards whose backward never came (not gradient)",
                   opt.peer_id, owed);
      release_claim_locked(owed);
    }
  }
  // Not known to be alone (the registry did not answer): it checkpoints all the same, a
  // checkpoint too many costs a write, one too few the stage's state.
  const bool alone = others_serve(*registry, opt.peer_id, from) != OthersServe::Yes;
  if (!handoff_gradients()) {
    swarm::MutexLock lk(mu);
    lost += samples_done;
  }
  if (alone && !opt.spec.checkpoint.path.empty()) write_checkpoint_now(/*wait=*/true);
  // Past the training's last step (the run ends, every worker drains) a partial step is never
  // taken by anyone: surplus the trainers sent before they stopped, not training lost.
  report_event(step.load() >= max_steps() ? "samples_past_last_step" : "samples_lost", lost);
  // The gradient is settled (handed off or counted): the registry must not count it again if
  // this process dies before it deregisters. A gradient handed off took its claim along (the
  // taker claimed it before it answered); one lost keeps its claim, so the step is not filled
  // again with other samples: it averages the global batch less the samples lost, as every
  // stage's step does after a fault (planner/step_book.h, Claims).
  int64_t keep;
  {
    swarm::MutexLock lk(mu);
    keep = lost;
    samples_done = 0;
    claim_used = claimed = keep;
    handoff_now = false;
  }
  try {
    registry->report_progress(from, step.load(), opt.peer_id, 0, target_samples, keep);
  } catch (const std::exception& e) {
    spdlog::warn("worker {}: could not clear its progress report: {}", opt.peer_id, e.what());
  }
  optimizer->zero_grad();
  const int to = move_to.exchange(-1);
  bool going;  // draining to exit: drain() sets `exiting` from another thread
  {
    swarm::MutexLock lk(mu);
    going = exiting;
  }
  if (to >= 0 && to != from && !going) {
    report_event("stage_moves", 1);
    become_stage(to, "moved by the rebalancer");
    return;
  }
  swarm::MutexLock lk(mu);
  if (to >= 0 && !exiting) {
    leaving = false;  // assigned to the stage it is on: nothing to do
    return;
  }
  left = true;
  cv.notify_all();
}

void StageServer::Impl::drain(double seconds) {
  {
    swarm::MutexLock lk(mu);
    if (stopping || left) return;
    if (failed) {  // holds nothing of the stage: nothing to hand off
      left = true;
      cv.notify_all();
      return;
    }
  }
  // The drain's budget (the pod's grace period, a reclaim notice): 45 % for the backwards owed,
  // up to 60 % waiting for the step to average this peer's gradient, to 85 % to hand it off and
  // checkpoint, and the rest to deregister, send the last counts and exit before a SIGKILL. With
  // no other peer serving the stage there is no step to wait for.
  // Unknown (the registry did not answer) is taken as "others serve": the peer waits for its step.
  const bool others = others_serve(*registry, opt.peer_id, stage.load()) != OthersServe::No;
  {
    swarm::MutexLock lk(mu);
    const double now = now_seconds();
    leaving = true;
    exiting = true;  // a move assigned from now on is ignored: this process is going away
    leave_deadline = now + 0.45 * seconds;
    handoff_at = others ? now + 0.6 * seconds : now;
    drain_ends = now + 0.85 * seconds;  // the rest of the budget: withdraw and exit before a SIGKILL
    exit_by = now + 0.95 * seconds;
  }
  cv.notify_all();
  try {
    announce();
  } catch (const std::exception&) {
  }
  // Waiting for the step only helps while it can still close: stop as soon as no other peer
  // serves the stage (they were stopped too, e.g. the run ended) or the stage's admitted samples
  // stopped growing short of the target (no trainer sends work).
  int64_t last_total = -1;
  double last_change = now_seconds();
  swarm::MutexLock lk(mu);
  const double until = drain_ends;
  while (!left && !stopping && now_seconds() < until) {
    cv.wait_for(mu, std::chrono::milliseconds(100), [&]() REQUIRES(mu) { return left || stopping; });
    const double now = now_seconds();
    if (left || stopping || samples_done == 0 || now >= handoff_at || step_full) continue;
    const int64_t total = stage_claims;
    if (total != last_total) {
      last_total = total;
      last_change = now;
    }
    bool stalled = now - last_change > 2.0;
    if (!stalled) {
      const int s = stage.load();
      lk.unlock();
      const bool alone = others_serve(*registry, opt.peer_id, s) == OthersServe::No;
      lk.lock();
      stalled = alone;
    }
    if (stalled) {
      handoff_at = now;
      cv.notify_all();
    }
  }
}

void StageServer::drain(double seconds) { impl_->drain(seconds); }

}  // namespace swarm::runtime
