#include "operator/controller/reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <type_traits>

#include "common/random_token.h"
#include "operator/controller/capacity_facts.h"
#include "operator/controller/job_status.h"
#include "operator/controller/manifests.h"
#include "operator/controller/reclaim.h"
#include "planner/placement.h"
#include "operator/kube/time_format.h"

namespace swarm::op {

namespace {

using kube::json;
using planner::CreateWorker;
using planner::DeleteWorker;
using planner::PlacementInput;
using planner::PlacementPlan;
using planner::WorkerState;
using planner::to_string;

std::string label_of(const json& pod, const char* key) {
  auto labels = pod["metadata"].value("labels", json::object());
  return labels.value(key, "");
}

int int_label(const json& pod, const char* key, int def) {
  try {
    return std::stoi(label_of(pod, key));
  } catch (...) {
    return def;
  }
}

// state.terminated.message of the pod's (only) container, "" when it has not terminated or left none.
std::string termination_message(const json& status) {
  const json statuses = status.value("containerStatuses", json::array());
  if (!statuses.is_array()) return "";
  for (const auto& c : statuses) {
    if (!c.is_object() || !c.contains("state") || !c["state"].is_object()) continue;
    const json terminated = c["state"].value("terminated", json::object());
    if (terminated.is_object() && terminated.contains("message") && terminated["message"].is_string())
      return terminated["message"].get<std::string>();
  }
  return "";
}

PodView view_of(const json& pod, World& world, const SwarmJob& job) {
  PodView v;
  const auto& md = pod["metadata"];
  v.name = md.value("name", "");
  v.key = md.value("namespace", "") + "/" + v.name;
  v.uid = md.value("uid", "");
  v.role = label_of(pod, kLabelRole);
  v.pool = label_of(pod, kLabelPool);
  v.slot = int_label(pod, kLabelSlot, 0);
  v.stage = int_label(pod, kLabelStage, -1);
  v.node = pod["spec"].value("nodeName", "");
  v.terminating = md.contains("deletionTimestamp") || world.recently_deleted(v.uid);
  const json status = pod.value("status", json::object());
  v.succeeded = status.value("phase", "") == "Succeeded";
  if (v.role == "trainer") v.termination_message = termination_message(status);
  bool ready = false;
  for (const auto& c : status.value("conditions", json::array())) {
    const std::string type = c.value("type", "");
    if (type == "Ready" && c.value("status", "") == "True") ready = true;
    if (type == "PodScheduled" && c.value("status", "") == "False" && c.value("reason", "") == "Unschedulable") {
      v.state = WorkerState::Unschedulable;
      v.unschedulable_since = kube::to_seconds(c.value("lastTransitionTime", ""));
    }
  }
  const std::string phase = status.value("phase", "Pending");
  if (phase == "Running") v.state = ready ? WorkerState::Ready : WorkerState::Running;
  v.notice = pod_notice(pod);
  if (!v.notice && !v.node.empty()) v.notice = world.notice_for_node(v.node);
  if (v.notice && !v.notice->lost) {
    for (const auto& p : job.op.pools)
      if (p.name == v.pool && p.reclaim_grace_seconds >= 0) v.notice->grace_seconds = p.reclaim_grace_seconds;
  }
  return v;
}

const NodePool* find_pool(const SwarmJob& job, const std::string& name) {
  for (const auto& p : job.op.pools)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace

void Reconciler::record(const SwarmJob& job, const std::string& type, const std::string& reason,
                        const std::string& msg) {
  events_.record({kGroupVersion, "SwarmJob", job.namespace_, job.name, job.uid}, type, reason, msg);
}

void Reconciler::ensure(const std::string& collection, const std::string& name, const json& manifest,
                        bool update_if_different) {
  auto current = client_.get_if_exists(collection + "/" + name);
  if (!current) {
    try {
      client_.create(collection, manifest);
    } catch (const kube::ApiError& e) {
      if (!e.conflict()) throw;  // AlreadyExists: someone (our previous life) made it meanwhile
    }
    return;
  }
  if (!update_if_different) return;
  for (const char* field : {"data", "spec"}) {
    if (manifest.contains(field) && (*current).value(field, json::object()) != manifest[field])
      client_.patch(collection + "/" + name, {{field, manifest[field]}});
  }
}

void Reconciler::ensure_support_objects(const SwarmJob& job) {
  {
    swarm::MutexLock lock(mu_);
    auto it = ensured_.find(job.uid);
    if (it != ensured_.end() && it->second == std::to_string(job.generation)) return;
  }
  const std::string ns = job.namespace_;
  ensure(kube::resource_path("v1", ns, "configmaps"), spec_configmap_name(job.name), spec_configmap(job), true);
  if (job.spec.secret.secret_ref_name.empty()) {
    const std::string path = kube::resource_path("v1", ns, "secrets");
    const auto existing = client_.get_if_exists(path + "/" + secret_name(job.name));
    if (!existing) {
      ensure(path, secret_name(job.name), data_plane_secret(job, random_hex_token()), false);
      record(job, "Normal", "SecretCreated", "data-plane secret " + secret_name(job.name) + " created");
    } else if ((*existing)["metadata"].value("ownerReferences", json::array()).empty() &&
               (*existing)["metadata"].value("annotations", json::object()).value(kAnnotationJobUid, "") != job.uid) {
      // Kept from an earlier job of this name (data_plane_secret): this one takes it up, once.
      client_.patch(path + "/" + secret_name(job.name), {{"metadata", {{"annotations", {{kAnnotationJobUid, job.uid}}}}}});
      record(job, "Normal", "SecretKept",
             "data-plane secret " + secret_name(job.name) + " kept from an earlier job of this name: its checkpoints in " +
                 job.spec.checkpoint.path + " resume (delete the Secret and the folder to start afresh)");
    }
  }
  const std::string services = kube::resource_path("v1", ns, "services");
  ensure(services, registry_service_name(job.name), registry_service(job), false);
  for (int s = 0; s < job.spec.pipeline.stages; ++s)
    ensure(services, stage_service_name(job.name, s), stage_service(job, s), false);
  // Updated when it differs: an operator restarted with another monitoring namespace moves it.
  if (network_policy_)
    ensure(kube::resource_path("networking.k8s.io/v1", ns, "networkpolicies"), network_policy_name(job.name),
           network_policy(job, *network_policy_), true);
  swarm::MutexLock lock(mu_);
  ensured_[job.uid] = std::to_string(job.generation);
}

void Reconciler::cleanup_deleted(const std::string& ns, const std::string& name) {
  // Owner references let the garbage collector do this in a real cluster; doing it here as well
  // costs little and keeps a cluster without kube-controller-manager clean too.
  if (client_.get_if_exists(kube::resource_path(kGroupVersion, ns, kPlural, name))) return;
  auto pods = world_.pods_of(ns, name);
  for (const auto& p : pods) {
    const std::string pod = p["metadata"].value("name", "");
    if (p["metadata"].contains("deletionTimestamp")) continue;
    client_.remove(kube::resource_path("v1", ns, "pods", pod), 0);
    world_.note_deleted(p["metadata"].value("uid", ""));
  }
  client_.remove(kube::resource_path("v1", ns, "configmaps", spec_configmap_name(name)));
  // The generated Secret of a job with checkpoints outlives it (manifests.h, data_plane_secret): a
  // job re-created under the name resumes with it. Only an owned one goes.
  const std::string secret = kube::resource_path("v1", ns, "secrets", secret_name(name));
  if (auto s = client_.get_if_exists(secret); s && !(*s)["metadata"].value("ownerReferences", json::array()).empty())
    client_.remove(secret);
  client_.remove(kube::resource_path("v1", ns, "services", registry_service_name(name)));
  for (int s = 0; s < 64; ++s) {
    if (!client_.remove(kube::resource_path("v1", ns, "services", stage_service_name(name, s)))) break;
  }
  if (network_policy_)
    client_.remove(kube::resource_path("networking.k8s.io/v1", ns, "networkpolicies", network_policy_name(name)));
  // Its Workloads lose the finalizer and go: the job's quota is given back (its pods were just
  // deleted at once).
  if (kueue_ && kueue_->synced()) kueue_->release_all(ns, name);
  metrics_.forget_job(ns + "/" + name);
}

void Reconciler::write_status(const json& job_obj, const SwarmJobStatus& status) {
  json next = to_json(status);
  if (job_obj.value("status", json::object()) == next) return;
  const auto& md = job_obj["metadata"];
  // Write-through: the next reconcile must start from these counters, not from a cache that has
  // not seen this write yet (or a preemption would be counted once instead of twice).
  world_.jobs.upsert(client_.patch(
      kube::resource_path(kGroupVersion, md.value("namespace", ""), kPlural, md.value("name", ""), "status"),
      {{"status", next}}));
}

namespace {

// "spot-us: 0 free, 4 used, 1 node under notice; spot-eu: 2 free, 2 used": where capacity went.
std::string capacity_summary(const planner::ClusterCapacity& cap) {
  std::string out;
  for (const auto& p : cap.pools) {
    out += (out.empty() ? "" : "; ") + (p.name.empty() ? std::string("default") : p.name) + ": " +
           std::to_string(p.free_slots) + " free, " + std::to_string(p.used_slots) + " used";
    if (p.under_notice > 0) out += ", " + std::to_string(p.under_notice) + " node(s) under notice";
    if (p.unusable > 0) out += ", " + std::to_string(p.unusable) + " node(s) NotReady/cordoned/deleting";
    if (p.nodes == 0) out += ", no node";
  }
  return out;
}

}  // namespace

std::optional<planner::ClusterCapacity> Reconciler::observe_capacity(const SwarmJob& job) {
  if (!world_.capacity_known()) return std::nullopt;
  std::vector<planner::PoolSelector> selectors;
  if (job.op.pools.empty()) selectors.push_back(pool_selector(nullptr));
  for (const auto& p : job.op.pools) selectors.push_back(pool_selector(&p));
  return planner::cluster_capacity(world_.node_facts(), world_.pods_on_nodes(), selectors, worker_request(job));
}

void Reconciler::apply_plan(const SwarmJob& job, const std::string& key, const PlacementPlan& plan,
                            const Observation& seen, const kueue::Overlay* overlay) {
  // Deletions first (the hand-off starts now), then creations.
  const std::string pods_path = kube::resource_path("v1", job.namespace_, "pods");
  const std::vector<std::string>& avoid_nodes = seen.avoid_nodes;
  const std::string capacity_text = seen.capacity ? capacity_summary(*seen.capacity) : "";
  std::map<std::string, const PodView*> by_name;
  for (const auto& w : seen.workers) by_name[w.name] = &w;
  auto pod_of = [&](const std::string& name) -> const PodView* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  for (const auto& d : plan.deletes) {
    const PodView* w = pod_of(d.name);
    client_.remove(pods_path + "/" + d.name, d.grace_seconds, w ? w->uid : "");
    if (w) world_.note_deleted(w->uid);
    if (d.preemption) metrics_.add_preemption(d.pool, d.reason);
    std::string msg = "worker " + d.name + " (stage " + std::to_string(d.stage) + ", pool " + d.pool + ")";
    if (w && !w->node.empty()) msg += " on node " + w->node;
    msg += ": " + d.reason + (d.grace_seconds > 0 ? ", handing off within " + std::to_string(d.grace_seconds) + " s"
                                                  : ", removed at once");
    if (d.reason == "NoCapacity") msg += " (its pool has no free slot and cannot grow; replaced where one is free)";
    spdlog::info("{}: {}", key, msg);
    record(job, d.preemption ? "Warning" : "Normal", d.preemption ? "WorkerReclaimed" : "WorkerRemoved", msg);
  }
  bool explained = false;
  for (const auto& c : plan.creates) {
    json pod = worker_pod(job, c.slot, c.stage, find_pool(job, c.pool), avoid_nodes, c.reason);
    if (overlay) kueue::apply_overlay(pod, *overlay);
    try {
      world_.pods.upsert(client_.create(pods_path, pod));
    } catch (const kube::ApiError& e) {
      if (!e.conflict()) throw;
      continue;  // it exists: made by our previous reconcile; the cache will show it
    }
    if (const PodView* old = c.replaces.empty() ? nullptr : pod_of(c.replaces)) {
      double age = world_.notice_age(old->key);
      if (age == 0 && !old->node.empty()) age = world_.notice_age(old->node);
      if (old->notice && !old->notice->lost && age > 0) metrics_.observe_reclaim_to_replacement(age);
    }
    const std::string msg = "worker " + worker_pod_name(job.name, c.slot) + " for stage " + std::to_string(c.stage) +
                            " in pool " + (c.pool.empty() ? "(any)" : c.pool) + ": " + c.reason +
                            (c.replaces.empty() ? "" : " (replaces " + c.replaces + ")") +
                            (c.waits ? ", waits for a node" : "") + (c.why.empty() ? "" : " — " + c.why);
    spdlog::info("{}: created {}", key, msg);
    record(job, "Normal",
           c.reason == "Overflow" ? "WorkerOverflow" : c.reason == "Surge" ? "WorkerSurge" : "WorkerCreated", msg);
    if (!explained && !capacity_text.empty()) {
      record(job, "Normal", "PoolCapacity", "capacity when placing: " + capacity_text);
      explained = true;
    }
  }
  if (plan.reassignments > 0) {
    metrics_.add_reassignments(plan.reassignments);
    record(job, "Warning", "StageReassigned",
           std::to_string(plan.reassignments) + " worker(s) moved to an empty stage");
  }
  for (const auto& pc : plan.pool_changes) {
    record(job, pc.available ? "Normal" : "Warning", pc.available ? "PoolRetry" : "PoolOverflow",
           pc.available ? "pool " + pc.pool + " is tried again"
                        : "pool " + pc.pool + " cannot schedule workers for " +
                              std::to_string(job.op.unschedulable_seconds) + " s; placing them in the next pool by priority");
  }
}

void Reconciler::keep_singletons(const SwarmJob& job, const std::vector<PodView>& pods, int desired, const std::string& role,
                                 const std::vector<std::string>& avoid_nodes, const kueue::Overlay* overlay) {
  // Trainers and the registry: fixed counts, replaced when their node goes.
  const std::string pods_path = kube::resource_path("v1", job.namespace_, "pods");
  const NodePool* stable = stable_pool(job);
  std::set<int> used;
  int alive = 0;
  for (const auto& p : pods) {
    used.insert(p.slot);
    if (p.terminating) continue;
    if (p.succeeded && role == "trainer") {
      ++alive;  // finished its steps: done, not lost
      continue;
    }
    if (p.notice) {
      client_.remove(pods_path + "/" + p.name, p.notice->lost ? 0 : p.notice->grace_seconds, p.uid);
      world_.note_deleted(p.uid);
      record(job, "Warning", "PodReclaimed", role + " " + p.name + ": " + p.notice->reason);
      continue;
    }
    ++alive;
  }
  for (int slot = 0; alive < desired; ++slot) {
    if (used.count(slot)) continue;
    json pod = role == "trainer" ? trainer_pod(job, slot, stable, avoid_nodes) : registry_pod(job, slot, stable, avoid_nodes);
    if (overlay) kueue::apply_overlay(pod, *overlay);
    try {
      world_.pods.upsert(client_.create(pods_path, pod));
      record(job, "Normal", role == "trainer" ? "TrainerCreated" : "RegistryCreated",
             role + " " + pod["metadata"].value("name", "") + " created");
    } catch (const kube::ApiError& e) {
      if (!e.conflict()) throw;
    }
    used.insert(slot);
    ++alive;
  }
}

namespace {

static_assert(std::is_same_v<WorkerCounts, std::map<OperatorMetrics::WorkerKey, int>>);

void log_plan(const std::string& key, const JobPlan& p, const std::optional<planner::ClusterCapacity>& capacity) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  std::string ws;
  for (const auto& w : p.in.workers)
    ws += " " + w.name + "[s" + std::to_string(w.stage) + "," + w.pool + "," + to_string(w.state) +
          (w.terminating ? ",terminating" : "") + (w.notice ? "," + w.notice->reason : "") + "]";
  spdlog::debug("{}: workers:{} -> {} delete(s), {} create(s){}", key, ws, p.plan.deletes.size(), p.plan.creates.size(),
                capacity ? "; capacity: " + capacity_summary(*capacity) : "");
}

}  // namespace

std::optional<SwarmJob> Reconciler::parse_or_fail(const json& obj, const SwarmJobStatus& status,
                                                  const std::string& now_s) {
  try {
    return parse_swarmjob(obj);
  } catch (const SpecError& e) {
    std::string msg;
    for (const auto& m : e.errors()) msg += (msg.empty() ? "" : "; ") + m;
    write_status(obj, invalid_spec_status(status, obj["metadata"].value("generation", 0LL), msg, now_s));
    events_.record(kube::ref_of(obj), "Warning", "InvalidSpec", msg);
    return std::nullopt;
  }
}

Reconciler::Observation Reconciler::observe(const SwarmJob& job) {
  Observation seen;
  for (const auto& p : world_.pods_of(job.namespace_, job.name)) {
    PodView v = view_of(p, world_, job);
    if (v.role == "worker") seen.workers.push_back(v);
    else if (v.role == "trainer") seen.trainers.push_back(v);
    else if (v.role == "registry") seen.registries.push_back(v);
  }
  std::set<std::string> avoid;
  for (const auto& n : world_.nodes_with_notice()) avoid.insert(n);
  for (const auto& w : seen.workers)
    if (w.notice && !w.notice->lost && !w.node.empty()) avoid.insert(w.node);
  seen.avoid_nodes.assign(avoid.begin(), avoid.end());
  seen.capacity = observe_capacity(job);
  return seen;
}

void Reconciler::publish(const SwarmJob& job, const std::string& key, const json& obj, const DerivedStatus& d) {
  if (d.new_failure) {
    spdlog::warn("{}: failed: {}", key, describe(*d.new_failure));
    metrics_.add_job_failure(d.new_failure->reason);
  }
  for (const auto& e : d.events) record(job, e.type, e.reason, e.message);
  metrics_.set_job(key, d.status.phase, d.workers);
  write_status(obj, d.status);
}

ReconcileResult Reconciler::reconcile(const std::string& key) {
  ReconcileResult result;
  auto obj = world_.jobs.get(key);
  if (!obj) {
    const auto slash = key.find('/');
    cleanup_deleted(key.substr(0, slash), key.substr(slash + 1));
    return result;
  }
  if ((*obj)["metadata"].contains("deletionTimestamp")) return result;
  const double now = kube::to_seconds(std::chrono::system_clock::now());
  const std::string now_s = kube::format_time(std::chrono::system_clock::now());
  const SwarmJobStatus status = status_from_json(obj->value("status", json::object()));
  std::optional<SwarmJob> job = parse_or_fail(*obj, status, now_s);
  if (!job) return result;
  if (kueue_ && !kueue_default_queue_.empty()) job->labels.emplace(kueue::kQueueNameLabel, kueue_default_queue_);
  ensure_support_objects(*job);

  const Observation seen = observe(*job);
  if (queued_path(*job)) return reconcile_queued(*job, key, *obj, status, seen, now, now_s);
  const JobPlan planned = plan_job(*job, seen.workers, seen.capacity, status, now);
  log_plan(key, planned, seen.capacity);

  apply_plan(*job, key, planned.plan, seen);
  keep_singletons(*job, seen.registries, 1, "registry", seen.avoid_nodes);
  keep_singletons(*job, seen.trainers, static_cast<int>(job->spec.trainers.count), "trainer", seen.avoid_nodes);

  std::optional<ProgressReading> reading;
  if (progress_) reading = progress_->latest(key);  // read after the apply, as it always was
  const DerivedStatus derived =
      derive_status({*job, status, planned.in, planned.plan, seen.workers, seen.trainers,
                     seen.capacity ? &*seen.capacity : nullptr, reading ? &*reading : nullptr, now_s});
  publish(*job, key, *obj, derived);

  if (planned.plan.requeue_at > 0) result.requeue_after_seconds = std::max(0.05, planned.plan.requeue_at - now);
  return result;
}

}  // namespace swarm::op
