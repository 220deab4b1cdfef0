// `swarm local`: the run's end, its processes stopped and its summary written (local_run.h).
#include "worker/local/local_run.h"

#include <sys/wait.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <thread>

#include "worker/runtime/clock.h"
#include "worker/checkpoint/export.h"
#include "worker/local/report.h"
#include "worker/local/step_invariant.h"

namespace swarm::runtime::local_run {

nlohmann::json LocalRun::merged() const {
  std::vector<nlohmann::json> rs;
  for (const auto& p : reports_) rs.push_back(read_json(p));
  return merge_reports(rs);
}

// The registry's stats once the trainers stopped and every stage closed the step their last
// microbatches filled (a few seconds at most; `fallback` when the registry does not answer): the
// step invariant compares each stage's step with the samples the trainers completed.
nlohmann::json LocalRun::settled_stats(const nlohmann::json& fallback) {
  nlohmann::json st = fallback;
  for (const double until = now_seconds() + 10; now_seconds() < until;) {
    try {
      st = registry_->stats();
    } catch (const std::exception&) {
    }
    bool settled = st.is_object() && st.contains("stageOpenSamples");
    for (const auto& [k, v] : settled ? st["stageOpenSamples"].items() : nlohmann::json::object().items())
      settled = settled && v.is_number_integer() && v.get<int64_t>() < spec_.training.global_batch;
    if (settled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return st;
}

// Stops every child, writes and prints the summary; returns the exit status.
int LocalRun::finish() {
  nlohmann::json stats;
  try {
    stats = registry_->stats();
  } catch (const std::exception& e) {
    spdlog::warn("cannot read the registry's stats: {}", e.what());
  }
  // Trainers first (they finish in-flight microbatches and write their reports), then workers.
  // A failed job has microbatches in flight that can never finish (a stage is gone): waiting for
  // them would only wait out the request timeouts. A worker drains for up to drain_seconds_, then
  // writes its last checkpoint and its report: the grace must cover all three, or a large stage
  // (SmolLM2's first, 70 M parameters: 1.1 GB with AdamW's moments) is killed mid-write.
  stop_children(children_, "trainer", failure_.is_null() ? 30 : 5);
  if (failure_.is_null()) stats = settled_stats(stats);
  stop_children(children_, "worker", failure_.is_null() ? drain_seconds_ + kLastCheckpointSeconds : 5);
  stop_children(children_, "", 5);
  auto report = merged();
  if (o_.progress) show(report, max_steps_, tty_, true);
  auto summary = summary_of(report, stats);
  const CheckpointLocation checkpoints =
      checkpoint_dir_.empty() ? CheckpointLocation(spec_.checkpoint) : CheckpointLocation(checkpoint_dir_);
  if (report.value("finished", false) && failure_.is_null() && o_.baseline.empty())
    if (auto p = export_at_end(spec_, checkpoints, resolve_secret(spec_.secret))) summary["exported_model"] = *p;
  write_summary(o_.summary_path, summary);
  for (const char* k : {"loss_curve", "progress"}) summary.erase(k);
  std::printf("%s\n", summary.dump(2).c_str());
  return exit_status(report);
}

// The merged report plus what happened to the swarm during the run (elasticity accounting) and
// the registry's event counts.
nlohmann::json LocalRun::summary_of(const nlohmann::json& report, nlohmann::json stats) {
  auto summary = make_summary(report, o_.baseline.empty() ? "swarm" : o_.baseline, now_seconds() - started_);
  summary["logs"] = dir_;
  summary["preemptions"] = preemptions_->preemptions();
  if (!o_.regions.empty()) summary["regions"] = o_.regions;
  double empty_total = 0;
  for (double v : stage_empty_) empty_total += v;
  summary["stage_empty_seconds"] = empty_total;
  summary["initial_workers"] = total_workers_;
  summary["mean_serving_workers"] = census_seconds_ > 0 ? serving_worker_seconds_ / census_seconds_ : 0.0;
  if (!final_peers_.empty()) summary["peers_per_stage"] = final_peers_;
  const nlohmann::json events = stats.is_object() ? stats.value("events", nlohmann::json::object()) : nlohmann::json::object();
  summary["rebalance_moves"] = stats.is_object() ? stats.value("rebalanceMoves", int64_t{0}) : 0;
  // The registry's step of each stage, how far apart they are, and whether each one is the
  // trainers' count of global batches, or differs by what faults account for (issue 29).
  summary.update(stage_step_spread(stats));
  summary["step_invariant"] = step_invariant({stats, report, spec_.training.global_batch, spec_.training.microbatch,
                                              registry_restarts_});
  for (const char* k : {"checkpoint_restores", "checkpoint_steps_lost", "stage_steps_lost", "samples_lost", "handoffs",
                        "resyncs", "state_downloads", "stage_moves", "unaveraged_steps", "peers_lost", "checkpoint_failures",
                        "stale_handoffs_taken", "stale_handoff_samples", "handoff_samples_unconfirmed",
                        "samples_past_last_step", "samples_readmitted", "samples_unretried", "steps_short", "step_samples_short",
                        "steps_over", "step_samples_over"})
    summary[k] = events.value(k, int64_t{0});
  // What the workers counted themselves beside what the registry heard (they differ by the counts
  // of workers killed outright, and by any the registry never acknowledged: events_unacknowledged).
  std::vector<nlohmann::json> worker_reports;
  for (const auto& p : worker_reports_) worker_reports.push_back(read_json(p));
  const auto own = sum_worker_events(worker_reports);
  summary["worker_events"] = own["events"];
  summary["events_unacknowledged"] = own["events_unacknowledged"];
  if (stats.is_object() && stats.contains("failure")) failure_ = stats["failure"];
  if (!failure_.is_null()) summary["failure"] = failure_;
  return summary;
}

// kJobFailedExit for a failed job, 130 when interrupted, 1 when a trainer failed or training
// ended early, else 0.
int LocalRun::exit_status(const nlohmann::json& report) const {
  if (!failure_.is_null()) {
    std::printf("swarm local: FAILED: %s (stage %d, step %lld): %s\n", failure_.value("reason", "?").c_str(),
                failure_.value("stage", -1), static_cast<long long>(failure_.value("step", int64_t{-1})),
                failure_.value("message", "").c_str());
    std::fflush(stdout);
    return kJobFailedExit;
  }
  if (interrupted_) return 130;
  int rc = 0;
  for (auto& c : children_) {
    const int status = c.proc.status();
    if (c.role == "trainer" && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      spdlog::error("{} failed ({}); its log:\n{}", c.name, describe_exit(status), tail_of(c.log, 20));
      rc = 1;
    }
  }
  if (rc == 0 && o_.max_seconds <= 0 && !report.value("finished", false)) {
    spdlog::error("training ended before step {}", max_steps_);
    rc = 1;
  }
  return rc;
}

}  // namespace swarm::runtime::local_run
