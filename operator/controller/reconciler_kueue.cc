// The reconcile of a job that is suspended or waits in a Kueue queue: observe (the caches, the
// job's Workloads) -> decide (operator/kueue/lifecycle.h, pure) -> apply (Workload writes,
// spec.suspend, pods inside the admission or one drain step) -> derive status (job_status.h, then
// the queue's phase and condition over it) -> publish.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "operator/controller/reconciler.h"
#include "operator/kube/time_format.h"

namespace swarm::op {
namespace {

using kube::json;

kueue::PodCounts count_pods(const std::vector<PodView>& workers, const std::vector<PodView>& trainers,
                            const std::vector<PodView>& registries, int stages) {
  kueue::PodCounts c;
  c.workers_by_stage.assign(static_cast<size_t>(std::max(stages, 1)), 0);
  for (const auto& w : workers) {
    (w.terminating ? c.workers_terminating : c.workers_alive)++;
    if (w.stage >= 0 && w.stage < stages) ++c.workers_by_stage[static_cast<size_t>(w.stage)];
  }
  for (const auto& t : trainers) {
    if (t.terminating) ++c.trainers_terminating;
    else if (!t.succeeded) ++c.trainers_alive;
  }
  for (const auto& r : registries) (r.terminating ? c.registries_terminating : c.registries_alive)++;
  return c;
}

// The training is over: every trainer it runs has Succeeded (its steps are done), or the registry
// reported a failure (condition Failed).
void training_end(const SwarmJob& job, const std::vector<PodView>& trainers, const SwarmJobStatus& status,
                  kueue::Inputs& in) {
  int succeeded = 0;
  for (const auto& t : trainers) succeeded += t.succeeded;
  const Condition* failed = find_condition(status.conditions, "Failed");
  in.succeeded = job.spec.trainers.count > 0 && succeeded >= static_cast<int>(job.spec.trainers.count);
  in.ended = in.succeeded || (failed && failed->status == "True");
}

// The job as it runs inside its admission: the pools narrowed to the workers' flavor.
SwarmJob job_inside(const SwarmJob& job, const kueue::Envelope& env) {
  SwarmJob inside = job;
  // No pool given and a flavor that adds nothing: anywhere, as without Kueue.
  if (job.op.pools.empty() && env.workers.node_selector.empty() && env.workers.tolerations.empty()) return inside;
  inside.op.pools = kueue::pools_within(job.op.pools, env.workers);
  return inside;
}

}  // namespace

bool Reconciler::queued_path(const SwarmJob& job) const {
  return job.op.suspend || (kueue_ && !kueue::queue_name(job).empty());
}

bool Reconciler::decide_queued(const SwarmJob& job, const json& obj, const SwarmJobStatus& status,
                               const Observation& seen, const std::string& now_s, kueue::Decision& d) {
  const kueue::PodCounts pods =
      count_pods(seen.workers, seen.trainers, seen.registries, static_cast<int>(job.spec.pipeline.stages));
  if (!kueue_ || kueue::queue_name(job).empty()) {  // suspended, no queue: the drain alone
    d.drain = kueue::drain_step(pods);
    d.phase = "Suspended";
    return true;
  }
  const kueue::JobTemplates templates = kueue_templates(job);
  kueue::Inputs in{job, templates};
  in.priority = kueue_->priority(job, &in.priority_problem);
  in.workloads = kueue_->workloads_of(job.namespace_, job.name);
  in.flavors = kueue_->flavors();
  in.pods = pods;
  training_end(job, seen.trainers, status, in);
  in.previous = status.queue;
  in.now = now_s;
  d = kueue::decide(in);
  const bool fresh = kueue_->apply(job, d);
  if (d.suspend) {
    const auto& md = obj["metadata"];
    world_.jobs.upsert(client_.patch(kube::resource_path(kGroupVersion, job.namespace_, kPlural, md.value("name", "")),
                                     {{"spec", {{"suspend", *d.suspend}}}}));
    spdlog::info("{}/{}: spec.suspend = {}", job.namespace_, job.name, *d.suspend);
  }
  return fresh;
}

void Reconciler::stop_pods(const SwarmJob& job, const Observation& seen, kueue::DrainStep step) {
  const std::vector<PodView>* pods = nullptr;
  std::string what;
  if (step == kueue::DrainStep::StopTrainers) {
    pods = &seen.trainers;
    what = "trainer";
  } else if (step == kueue::DrainStep::DrainWorkers) {
    pods = &seen.workers;
    what = "worker";
  } else if (step == kueue::DrainStep::StopRegistry) {
    pods = &seen.registries;
    what = "registry";
  } else {
    return;  // waiting for the pods of the step before to exit, or done
  }
  const std::string path = kube::resource_path("v1", job.namespace_, "pods");
  int n = 0;
  for (const auto& p : *pods) {
    if (p.terminating || p.succeeded) continue;
    // The pod's own grace period: a worker's SIGTERM starts its hand-off (and the last peer of its
    // stage writes a checkpoint) before the SIGKILL.
    client_.remove(path + "/" + p.name, std::nullopt, p.uid);
    world_.note_deleted(p.uid);
    ++n;
  }
  if (n > 0)
    record(job, "Normal", "Draining",
           std::to_string(n) + " " + what + " pod(s) stopped" +
               (what == "worker" ? " (SIGTERM: each hands its gradient off, the last peer of a stage checkpoints)"
                                 : ""));
}

ReconcileResult Reconciler::reconcile_queued(const SwarmJob& job, const std::string& key, const json& obj,
                                             const SwarmJobStatus& status, const Observation& seen, double now,
                                             const std::string& now_s) {
  ReconcileResult result;
  kueue::Decision d;
  if (kueue_ && !kueue::queue_name(job).empty()) {
    if (auto problem = kueue::queue_name_problem(job)) {
      write_status(obj, invalid_spec_status(status, job.generation, *problem, now_s));
      record(job, "Warning", "InvalidSpec", *problem);
      return result;
    }
    if (!kueue_->synced()) {
      // The Kueue caches are not filled (its CRDs missing, or the operator just started): decide
      // nothing, touch no pod. A job never decided before says why it waits.
      result.requeue_after_seconds = 5;
      spdlog::warn("{}: Kueue's Workloads cannot be listed yet; deciding again in 5 s", key);
      if (status.queue) return result;
      SwarmJobStatus s = status;
      s.phase = "Queued";
      s.queue = QueueStatus{};
      s.queue->name = kueue::queue_name(job);
      set_condition(s.conditions,
                    {"Queued", "True", "KueueUnavailable",
                     "Kueue's Workload API (kueue.x-k8s.io/v1beta2) cannot be listed: is Kueue installed?", "",
                     job.generation},
                    now_s);
      write_status(obj, s);
      return result;
    }
    if (!decide_queued(job, obj, status, seen, now_s, d)) {
      result.requeue_after_seconds = 0.2;
    }
  } else {
    decide_queued(job, obj, status, seen, now_s, d);
  }

  JobPlan planned;
  if (d.run && d.envelope) {
    const SwarmJob inside = job_inside(job, *d.envelope);
    planned = plan_job(inside, seen.workers, observe_capacity(inside), status, now, d.envelope->workers_per_stage);
    apply_plan(inside, key, planned.plan, seen, &d.envelope->workers);
    // The registry and trainers keep their own pool (the stable one), their own flavors added.
    keep_singletons(job, seen.registries, d.envelope->registries, "registry", seen.avoid_nodes, &d.envelope->registry);
    keep_singletons(job, seen.trainers, d.envelope->trainers, "trainer", seen.avoid_nodes,
                    &d.envelope->trainers_overlay);
    if (planned.plan.requeue_at > 0 && result.requeue_after_seconds == 0)
      result.requeue_after_seconds = std::max(0.05, planned.plan.requeue_at - now);
  } else {
    stop_pods(job, seen, d.drain);
    planned = plan_job(job, seen.workers, seen.capacity, status, now,
                       std::vector<int>(static_cast<size_t>(job.spec.pipeline.stages), 0));
    planned.plan = {};  // nothing placed: the status counts what is there
  }

  std::optional<ProgressReading> reading;
  if (progress_) reading = progress_->latest(key);
  DerivedStatus derived = derive_status({job, status, planned.in, planned.plan, seen.workers, seen.trainers,
                                         seen.capacity ? &*seen.capacity : nullptr, reading ? &*reading : nullptr, now_s});
  SwarmJobStatus& s = derived.status;
  const std::string placed_phase = s.phase;
  if (!d.phase.empty() && s.phase != "Failed") s.phase = d.phase;
  if (s.phase != placed_phase) {
    // derive_status announced its own phase change; the queue's phase is the one that happened.
    derived.events.erase(std::remove_if(derived.events.begin(), derived.events.end(),
                                        [](const StatusEvent& e) { return e.reason.rfind("Phase", 0) == 0; }),
                         derived.events.end());
    if (status.phase != s.phase)
      derived.events.push_back({"Normal", "Phase" + s.phase, "phase " + status.phase + " -> " + s.phase});
  }
  if (!d.queued.type.empty()) set_condition(s.conditions, d.queued, now_s);
  if (kueue_ && !kueue::queue_name(job).empty()) s.queue = d.queue;
  for (const auto& e : d.events) derived.events.push_back({e.type, e.reason, e.message});
  publish(job, key, obj, derived);
  return result;
}

}  // namespace swarm::op
