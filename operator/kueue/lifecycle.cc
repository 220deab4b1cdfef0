#include "operator/kueue/lifecycle.h"

#include <algorithm>

namespace swarm::op::kueue {
namespace {

using Kind = WorkloadWrite::Kind;

// The job's own Workloads (owned by this job, by uid) and the rest (an earlier job's of this name).
struct Owned {
  const WorkloadView* core = nullptr;
  std::vector<const WorkloadView*> extensions;
  std::vector<const WorkloadView*> stale;
};

Owned sort_out(const Inputs& in) {
  Owned o;
  for (const auto& w : in.workloads) {
    if (w.owner_uid != in.job.uid || !w.role) o.stale.push_back(&w);
    else if (*w.role == Role::Core && !o.core) o.core = &w;
    else if (*w.role == Role::Extension) o.extensions.push_back(&w);
    else o.stale.push_back(&w);  // a second core: not one this operator made
  }
  return o;
}

// Finalizer off, then deleted: the Workload (and its quota, if it still held any) goes.
void release_and_delete(const WorkloadView& w, Decision& d) {
  if (w.has_finalizer()) d.writes.push_back({Kind::Release, w.name, release_patch(w)});
  if (!w.deleting) d.writes.push_back({Kind::Delete, w.name, json()});
}

// No pod wanted: drain what is there (or nothing left to do).
void drain(const Inputs& in, Decision& d) {
  d.run = false;
  d.drain = drain_step(in.pods);
}

void queued(Decision& d, const std::string& status, const std::string& reason, const std::string& message,
            std::int64_t generation) {
  d.queued = {"Queued", status, reason, message, "", generation};
}

std::string queue_text(const Inputs& in) { return "LocalQueue " + queue_name(in.job); }

void on_ended(const Inputs& in, const Owned& o, Decision& d) {
  d.phase = in.succeeded ? "Finished" : "";  // a failed job keeps phase Failed
  drain(in, d);
  std::vector<const WorkloadView*> own = o.extensions;
  if (o.core) own.push_back(o.core);
  if (d.drain == DrainStep::Done) {
    for (const WorkloadView* w : own) {
      // Finished first: a Workload whose finalizer went could be deleted before Kueue reads it.
      if (!w->finished())
        d.writes.push_back({Kind::PatchStatus, w->name,
                            finished_patch(*w, in.succeeded, in.succeeded ? "the training finished" : "the job failed",
                                           in.now)});
      else if (w->has_finalizer())
        d.writes.push_back({Kind::Release, w->name, release_patch(*w)});
    }
  }
  queued(d, "False", in.succeeded ? "Finished" : "Failed",
         d.drain == DrainStep::Done ? "the job ended; its Workloads are Finished"
                                    : "the job ended; " + describe(d.drain, in.pods) + " before its quota is given back",
         in.job.generation);
}

void on_no_core(const Inputs& in, const Owned& o, Decision& d) {
  d.phase = "Queued";
  d.suspend = true;
  drain(in, d);
  for (const WorkloadView* x : o.extensions) release_and_delete(*x, d);
  if (!in.priority_problem.empty()) {
    queued(d, "True", "PriorityClassNotFound", in.priority_problem, in.job.generation);
    d.events.push_back({"Warning", "PriorityClassNotFound", in.priority_problem});
    return;
  }
  try {
    d.writes.push_back({Kind::Create, core_name(in.job), core_workload(in.job, in.templates, in.priority)});
  } catch (const std::exception& e) {
    queued(d, "True", "InvalidWorkload", e.what(), in.job.generation);
    return;
  }
  d.events.push_back({"Normal", "WorkloadCreated", "Workload " + core_name(in.job) + " created in " + queue_text(in)});
  queued(d, "True", "WorkloadCreated",
         "waiting for " + queue_text(in) + " to admit Workload " + core_name(in.job), in.job.generation);
}

// Counts an eviction once: it is known by its condition's transition time.
void note_eviction(const WorkloadView& core, Decision& d) {
  const Condition* ev = core.condition("Evicted");
  if (!ev || ev->last_transition_time == d.queue.last_eviction_time) return;
  ++d.queue.evictions;
  d.queue.last_eviction_reason = ev->reason;
  d.queue.last_eviction_message = ev->message;
  d.queue.last_eviction_time = ev->last_transition_time;
  d.events.push_back({"Warning", "Evicted", "Workload " + core.name + " evicted (" + ev->reason + "): " + ev->message +
                                                "; draining before its quota is given back"});
}

void on_evicted(const Inputs& in, const Owned& o, Decision& d) {
  d.phase = "Draining";
  d.suspend = true;
  note_eviction(*o.core, d);
  drain(in, d);
  const Condition* ev = o.core->condition("Evicted");
  const std::string why = ev ? ev->reason + ": " + ev->message : "evicted";
  if (d.drain == DrainStep::Done) {
    d.writes.push_back({Kind::PatchStatus, o.core->name, clear_admission_patch(*o.core, in.now)});
    for (const WorkloadView* x : o.extensions) release_and_delete(*x, d);
    d.events.push_back({"Normal", "QuotaReleased",
                        "every pod is gone: admission of Workload " + o.core->name + " cleared, queued again in " +
                            queue_text(in)});
  }
  queued(d, "True", "Evicted",
         "evicted by Kueue (" + why + "); " +
             (d.drain == DrainStep::Done ? std::string("quota given back, waiting in ") + queue_text(in)
                                         : describe(d.drain, in.pods) + " before the quota is given back"),
         in.job.generation);
}

void on_waiting(const Inputs& in, const Owned& o, Decision& d) {
  d.phase = "Queued";
  d.suspend = true;
  drain(in, d);
  if (d.drain == DrainStep::Done)
    for (const WorkloadView* x : o.extensions) release_and_delete(*x, d);
  const WorkloadView& core = *o.core;
  std::string reason = "Pending", message = "waiting for " + queue_text(in) + " to admit Workload " + core.name;
  if (!core.active) {
    reason = "Deactivated";
    message = "Workload " + core.name + " is deactivated (spec.active false): it is not admitted until reactivated";
  } else if (core.quota_reserved()) {
    reason = "QuotaReserved";
    message = "quota reserved in ClusterQueue " + core.cluster_queue + "; waiting for the admission checks of Workload " +
              core.name;
  } else if (const Condition* qr = core.condition("QuotaReserved"); qr && !qr->message.empty()) {
    reason = qr->reason.empty() ? reason : qr->reason;
    message += ": " + qr->message;
  }
  queued(d, "True", reason, message, in.job.generation);
}

// The extensions while the core is admitted: made, kept at their priority, their quota given back
// after an eviction once the workers beyond the core's are gone, refused on another flavor.
void manage_extensions(const Inputs& in, const Owned& o, const std::vector<WorkerGroup>& groups, const Envelope& env,
                       Decision& d) {
  int workers = 0, core_workers = 0;
  for (int n : in.pods.workers_by_stage) workers += n;
  for (const auto& g : groups) core_workers += o.core->admitted_count(g.pod_set);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string name = extension_name(in.job, g, groups.size());
    auto it = std::find_if(o.extensions.begin(), o.extensions.end(), [&](auto* x) { return x->name == name; });
    if (it == o.extensions.end()) {
      if (auto m = extension_workload(in.job, groups, g, in.priority, env.workers.node_selector,
                                      in.templates.owner_reference))
        d.writes.push_back({Kind::Create, name, *m});
      continue;
    }
    const WorkloadView& x = **it;
    if (x.priority != extension_priority(in.priority))
      d.writes.push_back({Kind::PatchSpec, x.name, {{"spec", {{"priority", extension_priority(in.priority)}}}}});
    if (x.evicted() && x.quota_reserved() && workers <= core_workers) {
      d.writes.push_back({Kind::PatchStatus, x.name, clear_admission_patch(x, in.now)});
      d.events.push_back({"Normal", "QuotaReleased", "extension Workload " + x.name + " evicted and its workers gone: "
                                                     "admission cleared"});
    }
  }
  for (const auto& name : env.refused_extensions) {
    for (const WorkloadView* x : o.extensions) {
      if (x->name != name || !x->active) continue;
      d.writes.push_back({Kind::PatchSpec, name, {{"spec", {{"active", false}}}}});
      d.events.push_back({"Warning", "ExtensionRefused",
                          "extension Workload " + name + " was admitted on other flavors than the core's workers; "
                          "deactivated (its quota goes back) rather than run outside them"});
    }
  }
}

void on_admitted(const Inputs& in, const Owned& o, Decision& d) {
  const WorkloadView& core = *o.core;
  if (in.job.op.suspend) d.suspend = false;
  if (in.priority && core.priority != in.priority->value)
    d.writes.push_back({Kind::PatchSpec, core.name, {{"spec", {{"priority", in.priority->value}}}}});
  std::vector<WorkerGroup> groups;
  try {
    groups = worker_groups(in.job, in.templates);
  } catch (const std::exception& e) {
    drain(in, d);
    queued(d, "True", "InvalidWorkload", e.what(), in.job.generation);
    return;
  }
  std::vector<WorkloadView> running;
  for (const WorkloadView* x : o.extensions)
    if (x->admitted() && !x->evicted() && x->active) running.push_back(*x);
  Envelope env = envelope(in.job, groups, core, running, in.flavors);
  manage_extensions(in, o, groups, env, d);
  d.queue.cluster_queue = env.cluster_queue;
  d.queue.admission = env.summary;
  for (int n : env.workers_per_stage) d.queue.admitted_workers += n;
  if (!env.problems.empty()) {
    // Where to put the pods is not known: make none, remove none, say why.
    std::string msg;
    for (const auto& p : env.problems) msg += (msg.empty() ? "" : "; ") + p;
    d.run = false;
    d.drain = DrainStep::Done;
    queued(d, "False", "AdmissionUnusable", "admitted by ClusterQueue " + env.cluster_queue + ", but " + msg,
           in.job.generation);
    return;
  }
  d.run = true;
  d.envelope = env;
  queued(d, "False", "Admitted",
         "admitted by ClusterQueue " + env.cluster_queue + " through " + queue_text(in) + ": " + env.summary,
         in.job.generation);
}

}  // namespace

DrainStep drain_step(const PodCounts& p) {
  if (p.trainers_alive > 0) return DrainStep::StopTrainers;
  if (p.trainers_terminating > 0) return DrainStep::WaitTrainers;
  if (p.workers_alive > 0) return DrainStep::DrainWorkers;
  if (p.workers_terminating > 0) return DrainStep::WaitWorkers;
  if (p.registries_alive > 0) return DrainStep::StopRegistry;
  if (p.registries_terminating > 0) return DrainStep::WaitRegistry;
  return DrainStep::Done;
}

std::string describe(DrainStep step, const PodCounts& p) {
  switch (step) {
    case DrainStep::StopTrainers:
    case DrainStep::WaitTrainers:
      return "stopping " + std::to_string(p.trainers_alive + p.trainers_terminating) + " trainer(s)";
    case DrainStep::DrainWorkers:
    case DrainStep::WaitWorkers:
      return "draining " + std::to_string(p.workers_alive + p.workers_terminating) +
             " worker(s) (hand-off, checkpoint of each stage)";
    case DrainStep::StopRegistry:
    case DrainStep::WaitRegistry:
      return "stopping the registry";
    case DrainStep::Done:
      break;
  }
  return "no pod left";
}

Decision decide(const Inputs& in) {
  Decision d;
  if (in.previous) d.queue = *in.previous;
  d.queue.name = queue_name(in.job);
  d.queue.cluster_queue.clear();
  d.queue.admission.clear();
  d.queue.admitted_workers = 0;
  const Owned o = sort_out(in);
  for (const WorkloadView* w : o.stale) release_and_delete(*w, d);
  d.queue.workloads.clear();
  if (o.core) d.queue.workloads.push_back(o.core->name);
  for (const WorkloadView* x : o.extensions) d.queue.workloads.push_back(x->name);
  if (in.ended) on_ended(in, o, d);
  else if (!o.core || o.core->deleting) on_no_core(in, o, d);
  else if (o.core->evicted() && o.core->quota_reserved()) on_evicted(in, o, d);
  else if (!o.core->admitted()) on_waiting(in, o, d);
  else on_admitted(in, o, d);
  if (d.suspend && *d.suspend == in.job.op.suspend) d.suspend.reset();
  return d;
}

std::vector<WorkloadWrite> release_all(const std::vector<WorkloadView>& workloads) {
  Decision d;
  for (const auto& w : workloads) release_and_delete(w, d);
  return d.writes;
}

}  // namespace swarm::op::kueue
