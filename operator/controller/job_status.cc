#include "operator/controller/job_status.h"

#include <set>

#include "operator/kube/time_format.h"

namespace swarm::op {

namespace {

using planner::PlacementInput;
using planner::PlacementPlan;
using planner::WorkerState;
using planner::to_string;

// The plan's bookkeeping: preemptions and reassignments counted, pool changes into `pools`.
void count_plan(const PlacementPlan& plan, SwarmJobStatus& status, std::map<std::string, PoolStatus>& pools,
                const std::string& now) {
  for (const auto& d : plan.deletes) {
    if (!d.preemption) continue;
    ++status.preemptions;
    status.last_preemption_time = now;
  }
  if (plan.reassignments > 0) status.stage_reassignments += plan.reassignments;
  for (const auto& pc : plan.pool_changes) {
    auto& ps = pools[pc.pool];
    ps.name = pc.pool;
    ps.available = pc.available;
    ps.reason = pc.reason;
    ps.unavailable_since = pc.available ? "" : now;
    ps.retry_at = pc.available ? "" : kube::format_time(kube::from_seconds(pc.until));
  }
}

// One entry per stage; what the registry said last (progress.h) stays until it says something new.
void reset_stages(const PlacementInput& in, SwarmJobStatus& status) {
  const std::vector<StageStatus> old_stages = status.stages;
  status.stages.assign(in.stages, StageStatus{});
  for (const auto& old : old_stages) {
    if (old.stage < 0 || old.stage >= in.stages) continue;
    auto& st = status.stages[old.stage];
    st.step = old.step;
    st.samples_per_second = old.samples_per_second;
    st.queue_length = old.queue_length;
    st.peers = old.peers;
  }
}

// The pools of placement, counts zeroed (availability carries over), capacity from the caches.
std::map<std::string, PoolStatus> reset_pools(const PlacementInput& in, std::map<std::string, PoolStatus>& old_pools,
                                              const planner::ClusterCapacity* capacity) {
  std::map<std::string, PoolStatus> pools;
  for (const auto& p : in.pools) {
    PoolStatus ps = old_pools.count(p.name) ? old_pools[p.name] : PoolStatus();
    ps.name = p.name;
    ps.ready = ps.workers = ps.unschedulable = 0;  // recounted below; availability carries over
    ps.capacity_known = false;
    if (capacity) {
      for (const auto& pc : capacity->pools) {
        if (pc.name != p.name) continue;
        ps.capacity_known = true;
        ps.nodes = pc.nodes;
        ps.nodes_under_notice = pc.under_notice;
        ps.nodes_unavailable = pc.unusable;
        ps.free_slots = pc.free_slots;
        ps.used_slots = pc.used_slots;
      }
    }
    pools[p.name] = ps;
  }
  return pools;
}

// Workers into stages and pools (those deleted by the plan or terminating count only in the
// metrics); returns the counts for the metrics.
WorkerCounts count_workers(const StatusInputs& x, std::map<std::string, PoolStatus>& pools, SwarmJobStatus& status) {
  std::set<std::string> deleted_now;
  for (const auto& d : x.plan.deletes) deleted_now.insert(d.name);
  WorkerCounts metric_workers;
  std::set<std::string> reclaimed;
  for (const auto& w : x.workers) {
    if (w.notice && !w.node.empty()) reclaimed.insert(w.node);
    const bool gone = w.terminating || deleted_now.count(w.name);
    metric_workers[{w.pool, w.stage, gone ? "Terminating" : to_string(w.state)}]++;
    if (gone || w.stage < 0 || w.stage >= x.in.stages) continue;
    auto& st = status.stages[w.stage];
    auto& ps = pools[w.pool];
    ps.name = w.pool;
    ++ps.workers;
    if (w.state == WorkerState::Ready) {
      ++st.ready;
      ++ps.ready;
      ++status.ready_workers;
    } else {
      ++st.pending;
      if (w.state == WorkerState::Unschedulable) ++ps.unschedulable;
    }
  }
  for (const auto& c : x.plan.creates) ++status.stages[c.stage].pending;
  status.reclaimed_nodes.assign(reclaimed.begin(), reclaimed.end());
  status.trainers_ready = 0;
  for (const auto& t : x.trainers)
    if (!t.terminating && t.state == WorkerState::Ready) ++status.trainers_ready;
  return metric_workers;
}

// Phase and the conditions SpecValid, Ready, Degraded, PoolOverflow.
void set_phase(const SwarmJob& job, const PlacementInput& in, bool overflow, SwarmJobStatus& status,
               const std::string& now) {
  int degraded_stages = 0;
  for (int s = 0; s < in.stages; ++s) {
    status.stages[s].stage = s;
    status.stages[s].desired = planner::desired_workers(in, s);
    if (status.stages[s].ready < job.op.min_per_stage) ++degraded_stages;
  }
  const std::string old_phase = status.phase;
  if (degraded_stages == 0) status.phase = "Running";
  else if (old_phase == "Running" || old_phase == "Degraded") status.phase = "Degraded";
  else status.phase = "Pending";
  const auto gen = job.generation;
  set_condition(status.conditions, {"SpecValid", "True", "Valid", "the spec is valid", "", gen}, now);
  set_condition(status.conditions,
                {"Ready", degraded_stages == 0 ? "True" : "False", degraded_stages == 0 ? "AllStagesServed" : "StagesUnderServed",
                 std::to_string(in.stages - degraded_stages) + "/" + std::to_string(in.stages) +
                     " stages have at least " + std::to_string(job.op.min_per_stage) + " ready worker(s)", "", gen},
                now);
  set_condition(status.conditions,
                {"Degraded", status.phase == "Degraded" ? "True" : "False",
                 status.phase == "Degraded" ? "StageBelowMinimum" : "AsExpected",
                 std::to_string(degraded_stages) + " stage(s) below spec.workers.minPerStage", "", gen}, now);
  set_condition(status.conditions,
                {"PoolOverflow", overflow ? "True" : "False", overflow ? "PoolUnschedulable" : "AllPoolsAvailable",
                 overflow ? "some pools cannot schedule workers; their workers run in the next pool by priority"
                          : "every pool is available", "", gen}, now);
}

// Checkpoints of another instance of the job in its folder (a job deleted and re-created under its
// name whose Secret went with it): the workers never restore, count or remove them, and count them
// (foreign_checkpoints, once per file per worker). Said once: a condition naming the folder, and
// a Warning Event when it turns True (issue 29).
void fold_foreign_checkpoints(const SwarmJob& job, SwarmJobStatus& status, const std::string& now, DerivedStatus& out) {
  const auto it = status.swarm_events.find("foreign_checkpoints");
  if (it == status.swarm_events.end() || it->second <= 0) return;
  const Condition* before = find_condition(status.conditions, "ForeignCheckpoints");
  const std::string message =
      "checkpoint files in " + checkpoint_folder(job) +
      " were written by another instance of this job (another secret; the workers counted " +
      std::to_string(it->second) + ", each file once per worker that found it): they are never restored, counted "
      "by the retention or removed; delete them, or give the job the Secret that wrote them (spec.secret.secretRef)";
  set_condition(status.conditions, {"ForeignCheckpoints", "True", "AnotherInstancesCheckpoints", message, "", job.generation},
                now);
  if (!before || before->status != "True") out.events.push_back({"Warning", "ForeignCheckpoints", message});
}

// The registry's reading: figures, a failure, and whether the registry is reachable.
void fold_reading(const SwarmJob& job, const ProgressReading& reading, const std::string& now, DerivedStatus& out) {
  SwarmJobStatus& status = out.status;
  if (reading.has_progress) {
    apply_progress(status, reading.progress,
                   reading.step_changed_unix > 0 ? kube::format_time(kube::from_seconds(reading.step_changed_unix)) : "");
    const auto& failure = reading.progress.stats.failure;
    if (apply_failure(status, failure, job.generation, now)) {
      out.new_failure = *failure;
      out.events.push_back({"Warning", failure->reason, describe(*failure)});
    }
  }
  fold_foreign_checkpoints(job, status, now, out);
  const Condition* before = find_condition(status.conditions, "RegistryReachable");
  const bool was_ok = !before || before->status == "True";
  if (reading.ok) {
    status.progress_read_time.clear();  // the figures are current
    set_condition(status.conditions,
                  {"RegistryReachable", "True", "RegistryRead", "progress read from " + reading.url, "", job.generation},
                  now);
    if (!was_ok) out.events.push_back({"Normal", "RegistryReachable", "progress read from " + reading.url + " again"});
  } else {
    // How old the figures are: the last good reading (kept while the registry stays unreachable).
    if (reading.read_unix > 0) status.progress_read_time = kube::format_time(kube::from_seconds(reading.read_unix));
    set_condition(status.conditions,
                  {"RegistryReachable", "False", reading.error_reason,
                   reading.error + " (step, samplesPerSecond and stages[] keep their values of " +
                       (status.progress_read_time.empty() ? std::string("no reading yet")
                                                          : "the last reading, at " + status.progress_read_time) +
                       ")",
                   "", job.generation},
                  now);
    if (was_ok) out.events.push_back({"Warning", reading.error_reason, reading.error});
  }
}

// status.exportedModel/exportedStep from the succeeded trainers' termination messages: the
// highest step wins; a location already reported at that step or a later one is kept.
void fold_exports(const StatusInputs& x, DerivedStatus& out) {
  SwarmJobStatus& status = out.status;
  std::optional<ModelExport> best;
  std::string from;
  for (const auto& t : x.trainers) {
    if (!t.succeeded || t.termination_message.empty()) continue;
    const std::optional<ModelExport> e = parse_model_export(t.termination_message);
    if (!e || (best && e->step <= best->step)) continue;
    best = e;
    from = t.name;
  }
  if (!best) return;
  if (!status.exported_model.empty() && best->step <= status.exported_step) return;
  status.exported_model = best->location;
  status.exported_step = best->step;
  out.events.push_back({"Normal", "ModelExported",
                        "model exported to " + best->location + " at step " + std::to_string(best->step) +
                            " (trainer " + from + ")"});
}

}  // namespace

std::optional<ModelExport> parse_model_export(const std::string& message) {
  const json j = json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;  // also a parse error (discarded)
  const auto location = j.find("exportedModel");
  const auto step = j.find("step");
  if (location == j.end() || !location->is_string() || step == j.end()) return std::nullopt;
  if (!step->is_number_integer() || step->get<std::int64_t>() < 0) return std::nullopt;  // > 2^63 wraps below 0
  ModelExport e{location->get<std::string>(), step->get<std::int64_t>()};
  if (e.location.empty()) return std::nullopt;
  return e;
}

DerivedStatus derive_status(const StatusInputs& x) {
  DerivedStatus out;
  SwarmJobStatus& status = out.status;
  status = x.previous;
  std::map<std::string, PoolStatus> old_pools;
  for (const auto& p : status.pools) old_pools[p.name] = p;
  count_plan(x.plan, status, old_pools, x.now);

  status.observed_generation = x.job.generation;
  reset_stages(x.in, status);
  status.ready_workers = 0;
  status.desired_workers = 0;
  for (int s = 0; s < x.in.stages; ++s) status.desired_workers += planner::desired_workers(x.in, s);
  std::map<std::string, PoolStatus> pools = reset_pools(x.in, old_pools, x.capacity);
  out.workers = count_workers(x, pools, status);
  status.pools.clear();
  bool overflow = false;
  for (const auto& p : x.in.pools) {
    PoolStatus ps = pools[p.name];
    ps.name = p.name.empty() ? "default" : p.name;
    overflow |= !ps.available;
    status.pools.push_back(ps);
  }
  set_phase(x.job, x.in, overflow, status, x.now);

  if (x.reading) fold_reading(x.job, *x.reading, x.now, out);
  // A failure the registry reported stays until a reading says otherwise (the poller stops reading
  // a Failed job's registry, so its last word stands).
  if (const Condition* failed = find_condition(status.conditions, "Failed"); failed && failed->status == "True")
    status.phase = "Failed";
  const std::string& old_phase = x.previous.phase;
  if (old_phase != status.phase)
    out.events.push_back({status.phase == "Degraded" || status.phase == "Failed" ? "Warning" : "Normal",
                          "Phase" + status.phase, "phase " + old_phase + " -> " + status.phase});
  fold_exports(x, out);
  return out;
}

SwarmJobStatus invalid_spec_status(SwarmJobStatus status, std::int64_t generation, const std::string& message,
                                   const std::string& now) {
  status.phase = "Failed";
  status.observed_generation = generation;
  set_condition(status.conditions, {"SpecValid", "False", "InvalidSpec", message, "", status.observed_generation}, now);
  return status;
}

}  // namespace swarm::op
