// `swarm local`: the loop that watches the run's processes (local_run.h).
#include "worker/local/local_run.h"

#include <signal.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <thread>

#include "worker/runtime/clock.h"
#include "worker/local/report.h"

namespace swarm::runtime::local_run {

void reap(std::vector<Child>& children) {
  for (auto& c : children) c.proc.poll();
}

void stop_children(std::vector<Child>& children, const std::string& role, double grace_seconds) {
  for (auto& c : children)
    if (!c.exited() && (role.empty() || c.role == role)) c.proc.signal(SIGTERM);
  const double until = now_seconds() + grace_seconds;
  while (now_seconds() < until) {
    reap(children);
    bool alive = false;
    for (auto& c : children) alive = alive || (!c.exited() && (role.empty() || c.role == role));
    if (!alive) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& c : children) {
    if (!c.exited() && (role.empty() || c.role == role)) {
      spdlog::warn("{} did not stop within {} s; killing it", c.name, grace_seconds);
      c.proc.kill();
    }
  }
}

bool LocalRun::trainers_running() const {
  for (const auto& c : children_)
    if (c.role == "trainer" && !c.exited()) return true;
  return false;
}

// Until every trainer exited, the job failed or the run is interrupted (nullopt: go on to
// finish()); an exit status when the run failed on the way (children already stopped).
std::optional<int> LocalRun::supervise() {
  // A trainer stops itself at max steps / max seconds; this bound only catches a hung run.
  const double hard_deadline = o_.max_seconds > 0 ? started_ + o_.max_seconds + 120 : 0;
  last_census_ = now_seconds();
  preemptions_ = std::make_unique<PreemptionSchedule>(popt_, now_seconds());
  stage_empty_.assign(spec_.pipeline.stages, 0.0);
  empty_since_.assign(spec_.pipeline.stages, 0.0);
  while (true) {
    reap(children_);
    if (!trainers_running()) return std::nullopt;
    if (auto why = restart_exited_registry()) return fail(*why);
    withdraw_dead_workers();
    if (preemptions_->enabled()) preempt();
    if (now_seconds() - last_census_ >= 0.5) census();
    if (auto why = lost_stage()) return fail(*why);
    if (job_failed()) return std::nullopt;
    if (stop_) {
      interrupted_ = true;
      return std::nullopt;
    }
    if (hard_deadline > 0 && now_seconds() > hard_deadline) return fail("the run did not end in time");
    if (o_.progress && now_seconds() - last_show_ >= 1.0) {
      show(merged(), max_steps_, tty_, false);
      last_show_ = now_seconds();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A worker process that died is gone now: tell discovery at once instead of letting its record
// expire (the operator does the same on pod deletion), so joiners see the empty slot.
// A call the registry did not answer (restarting, loaded) is tried again every half second, until
// it lands: a dead worker left in discovery holds its slot until its record expires, and what it
// held would be counted late.
void LocalRun::withdraw_dead_workers() {
  const double now = now_seconds();
  for (auto& c : children_) {
    if (c.role != "worker" || !c.exited() || c.withdrawn || now < c.withdraw_retry_at) continue;
    try {
      registry_->withdraw(c.name.substr(std::string("worker ").size()), /*settled=*/false);
      c.withdrawn = true;
    } catch (const std::exception& e) {
      spdlog::warn("could not withdraw {} from discovery (trying again): {}", c.name, e.what());
      c.withdraw_retry_at = now + 0.5;
    }
  }
}

// The preemption schedule's due actions: signal a victim, or start a joiner.
void LocalRun::preempt() {
  std::vector<std::string> alive;
  for (auto& c : children_)
    if (c.role == "worker" && !c.exited()) alive.push_back(c.name);
  const auto actions = preemptions_->due(now_seconds(), alive);
  // Counted in the registry until it lands (a failed call is tried again half a second later).
  const int64_t unreported = preemptions_->preemptions() - preemptions_reported_;
  if (unreported > 0 && now_seconds() >= preemptions_retry_at_) {
    try {
      registry_->add_event("preemptions", unreported);
      preemptions_reported_ += unreported;
    } catch (const std::exception& e) {
      spdlog::warn("could not count {} preemptions in the registry (trying again): {}", unreported, e.what());
      preemptions_retry_at_ = now_seconds() + 0.5;
    }
  }
  for (const auto& a : actions) {
    if (a.kind == PreemptionAction::Respawn) {
      start_worker("joiner" + std::to_string(joiners_++), -1, joiner_regions_.next());
      continue;
    }
    for (auto& c : children_) {
      if (c.name != a.victim || c.exited()) continue;
      spdlog::info("preempting {} ({})", c.name, a.kind == PreemptionAction::Kill ? "SIGKILL" : "SIGTERM");
      if (!c.preempted) joiner_regions_.preempted(c.region);
      c.preempted = true;
      c.proc.signal(a.kind == PreemptionAction::Kill ? SIGKILL : SIGTERM);
    }
  }
}

// Seconds each stage spent with no serving peer, as discovery sees it, and the serving capacity.
void LocalRun::census() {
  const double now = now_seconds();
  try {
    std::vector<int> serving(spec_.pipeline.stages, 0);
    for (const auto& p : registry_->peers("worker"))
      if (p.stage >= 0 && p.stage < spec_.pipeline.stages && planner::routable(p.state))
        serving[p.stage]++;
    bool all = true;
    for (int s = 0; s < spec_.pipeline.stages; ++s) all = all && serving[s] > 0;
    swarm_up_ = swarm_up_ || all;  // start-up is not an outage
    if (swarm_up_) {
      int total = 0;
      for (int n : serving) total += n;
      serving_worker_seconds_ += total * (now - last_census_);
      census_seconds_ += now - last_census_;
    }
    for (int s = 0; s < spec_.pipeline.stages && swarm_up_; ++s) {
      if (serving[s] == 0) stage_empty_[s] += now - last_census_;
      empty_since_[s] = serving[s] > 0 ? 0 : (empty_since_[s] > 0 ? empty_since_[s] : now);
    }
    final_peers_ = serving;
  } catch (const std::exception&) {
  }
  last_census_ = now;
}

// A stage with no serving peer stalls training; without respawns nothing will fill it.
std::optional<std::string> LocalRun::lost_stage() const {
  for (int s = 0; s < spec_.pipeline.stages && !preemptions_->enabled(); ++s) {
    if (empty_since_[s] == 0 || now_seconds() - empty_since_[s] < kStageLostSeconds) continue;
    std::string logs;
    for (auto& c : children_)
      if (c.role == "worker" && c.exited())
        logs += c.name + " (" + describe_exit(c.proc.status()) + "):\n" + tail_of(c.log, 15);
    return "stage " + std::to_string(s) + " has had no serving worker for " +
           std::to_string(static_cast<int>(kStageLostSeconds)) + " s; exited workers:\n" + logs;
  }
  return std::nullopt;
}

// Reads the registry's failure and event counts (every 0.5 s); true once the job failed.
bool LocalRun::job_failed() {
  if (now_seconds() - last_failure_check_ < 0.5) return false;
  last_failure_check_ = now_seconds();
  try {
    auto st = registry_->stats();
    if (st.contains("failure") && st["failure"].is_object()) failure_ = st["failure"];
    if (st.contains("events") && st["events"].is_object()) events_seen_ = st["events"];
  } catch (const std::exception&) {
  }
  if (failure_.is_null()) return false;
  if (o_.progress && tty_) std::printf("\n");
  spdlog::error("the job failed: {} of stage {} at step {}: {}", failure_.value("reason", "?"),
                failure_.value("stage", -1), failure_.value("step", int64_t{-1}), failure_.value("message", ""));
  return true;
}

}  // namespace swarm::runtime::local_run
