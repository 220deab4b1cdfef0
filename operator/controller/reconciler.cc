#include "operator/controller/reconciler.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "operator/controller/capacity_facts.h"
#include "operator/controller/manifests.h"
#include "operator/controller/reclaim.h"
#include "planner/placement.h"
#include "operator/kube/time_format.h"

namespace swarm::op {

// One of the job's pods as the reconciler reads it.
struct PodView {
  std::string name, key, uid, role, node, pool;
  int slot = 0, stage = -1;
  planner::WorkerState state = planner::WorkerState::Pending;
  double unschedulable_since = 0;
  bool terminating = false, succeeded = false;
  std::optional<Notice> notice;
};

namespace {

using kube::json;
using planner::CreateWorker;
using planner::DeleteWorker;
using planner::PlacementInput;
using planner::PlacementPlan;
using planner::PoolInfo;
using planner::WorkerState;
using planner::plan_workers;
using planner::to_string;

std::string random_token() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof(buf)) != 1) throw std::runtime_error("RAND_bytes failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buf) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

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
  if (update_if_different && manifest.contains("data") && (*current).value("data", json::object()) != manifest["data"]) {
    client_.patch(collection + "/" + name, {{"data", manifest["data"]}});
  }
}

void Reconciler::ensure_support_objects(const SwarmJob& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ensured_.find(job.uid);
    if (it != ensured_.end() && it->second == std::to_string(job.generation)) return;
  }
  const std::string ns = job.namespace_;
  ensure(kube::resource_path("v1", ns, "configmaps"), spec_configmap_name(job.name), spec_configmap(job), true);
  if (job.spec.secret.secret_ref_name.empty()) {
    const std::string path = kube::resource_path("v1", ns, "secrets");
    if (!client_.get_if_exists(path + "/" + secret_name(job.name))) {
      ensure(path, secret_name(job.name), data_plane_secret(job, random_token()), false);
      record(job, "Normal", "SecretCreated", "data-plane secret " + secret_name(job.name) + " created");
    }
  }
  const std::string services = kube::resource_path("v1", ns, "services");
  ensure(services, registry_service_name(job.name), registry_service(job), false);
  for (int s = 0; s < job.spec.pipeline.stages; ++s)
    ensure(services, stage_service_name(job.name, s), stage_service(job, s), false);
  std::lock_guard<std::mutex> lock(mu_);
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
  client_.remove(kube::resource_path("v1", ns, "secrets", secret_name(name)));
  client_.remove(kube::resource_path("v1", ns, "services", registry_service_name(name)));
  for (int s = 0; s < 64; ++s) {
    if (!client_.remove(kube::resource_path("v1", ns, "services", stage_service_name(name, s)))) break;
  }
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

void Reconciler::apply_registry_reading(const SwarmJob& job, const std::string& key, SwarmJobStatus& status,
                                        const std::string& now_s) {
  const auto reading = progress_->latest(key);
  if (!reading) return;  // not read yet (or the job is not running): keep what status says
  if (reading->has_progress) {
    apply_progress(status, reading->progress,
                   reading->step_changed_unix > 0 ? kube::format_time(kube::from_seconds(reading->step_changed_unix)) : "");
    const auto& failure = reading->progress.stats.failure;
    if (apply_failure(status, failure, job.generation, now_s)) {
      spdlog::warn("{}: failed: {}", key, describe(*failure));
      record(job, "Warning", failure->reason, describe(*failure));
      metrics_.add_job_failure(failure->reason);
    }
  }
  const Condition* before = find_condition(status.conditions, "RegistryReachable");
  const bool was_ok = !before || before->status == "True";
  if (reading->ok) {
    set_condition(status.conditions,
                  {"RegistryReachable", "True", "RegistryRead", "progress read from " + reading->url, "", job.generation},
                  now_s);
    if (!was_ok) record(job, "Normal", "RegistryReachable", "progress read from " + reading->url + " again");
  } else {
    set_condition(status.conditions,
                  {"RegistryReachable", "False", reading->error_reason,
                   reading->error + " (step, samplesPerSecond and stages[] keep their last values)", "", job.generation},
                  now_s);
    if (was_ok) record(job, "Warning", reading->error_reason, reading->error);
  }
}

namespace {

// Placement's view of the job: its pools (availability carried over in status), its workers.
PlacementInput placement_input(const SwarmJob& job, const std::vector<PodView>& workers,
                               const std::map<std::string, PoolStatus>& old_pools, double now) {
  PlacementInput in;
  in.stages = static_cast<int>(job.spec.pipeline.stages);
  in.per_stage = static_cast<int>(job.spec.workers.per_stage);
  in.max_per_stage = effective_max_per_stage(job);
  in.min_per_stage = job.op.min_per_stage;
  in.now = now;
  in.unschedulable_seconds = job.op.unschedulable_seconds;
  in.retry_pool_seconds = job.op.retry_pool_seconds;
  if (job.op.pools.empty()) {
    in.pools.push_back({"", 0, -1, 0, 0, false});
  } else {
    for (const auto& p : job.op.pools) {
      PoolInfo info{p.name, p.priority, p.max_workers, 0, 0, p.autoscaled};
      auto it = old_pools.find(p.name);
      if (it != old_pools.end() && !it->second.available) {
        info.unavailable_until = kube::to_seconds(it->second.retry_at);
        info.unavailable_since = kube::to_seconds(it->second.unavailable_since);
      }
      in.pools.push_back(info);
    }
  }
  for (const auto& w : workers)
    in.workers.push_back({w.name, w.stage, w.pool, w.slot, w.state, w.unschedulable_since, w.terminating, w.notice, w.node});
  return in;
}

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
                            const std::map<std::string, const PodView*>& by_name,
                            const std::vector<std::string>& avoid_nodes, const std::string& capacity_text,
                            SwarmJobStatus& status, std::map<std::string, PoolStatus>& pools, const std::string& now_s) {
  // Deletions first (the hand-off starts now), then creations.
  const std::string pods_path = kube::resource_path("v1", job.namespace_, "pods");
  auto pod_of = [&](const std::string& name) -> const PodView* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  for (const auto& d : plan.deletes) {
    const PodView* w = pod_of(d.name);
    client_.remove(pods_path + "/" + d.name, d.grace_seconds, w ? w->uid : "");
    if (w) world_.note_deleted(w->uid);
    if (d.preemption) {
      ++status.preemptions;
      status.last_preemption_time = now_s;
      metrics_.add_preemption(d.pool, d.reason);
    }
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
    status.stage_reassignments += plan.reassignments;
    metrics_.add_reassignments(plan.reassignments);
    record(job, "Warning", "StageReassigned",
           std::to_string(plan.reassignments) + " worker(s) moved to an empty stage");
  }
  for (const auto& pc : plan.pool_changes) {
    auto& ps = pools[pc.pool];
    ps.name = pc.pool;
    ps.available = pc.available;
    ps.reason = pc.reason;
    ps.unavailable_since = pc.available ? "" : now_s;
    ps.retry_at = pc.available ? "" : kube::format_time(kube::from_seconds(pc.until));
    record(job, pc.available ? "Normal" : "Warning", pc.available ? "PoolRetry" : "PoolOverflow",
           pc.available ? "pool " + pc.pool + " is tried again"
                        : "pool " + pc.pool + " cannot schedule workers for " +
                              std::to_string(job.op.unschedulable_seconds) + " s; placing them in the next pool by priority");
  }
}

void Reconciler::keep_singletons(const SwarmJob& job, std::vector<PodView>& pods, int desired, const std::string& role,
                                 const std::vector<std::string>& avoid_nodes) {
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

ReconcileResult Reconciler::reconcile(const std::string& key) {
  ReconcileResult result;
  const auto slash = key.find('/');
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  auto obj = world_.jobs.get(key);
  if (!obj) {
    cleanup_deleted(ns, name);
    return result;
  }
  if ((*obj)["metadata"].contains("deletionTimestamp")) return result;
  const double now = kube::to_seconds(std::chrono::system_clock::now());
  const std::string now_s = kube::format_time(std::chrono::system_clock::now());
  SwarmJob job;
  SwarmJobStatus status = status_from_json(obj->value("status", json::object()));
  try {
    job = parse_swarmjob(*obj);
  } catch (const SpecError& e) {
    std::string msg;
    for (const auto& m : e.errors()) msg += (msg.empty() ? "" : "; ") + m;
    status.phase = "Failed";
    status.observed_generation = (*obj)["metadata"].value("generation", 0LL);
    set_condition(status.conditions, {"SpecValid", "False", "InvalidSpec", msg, "", status.observed_generation}, now_s);
    write_status(*obj, status);
    events_.record(kube::ref_of(*obj), "Warning", "InvalidSpec", msg);
    return result;
  }
  ensure_support_objects(job);

  // Observe: the job's pods, nodes with a notice, the pools' capacity.
  std::vector<PodView> workers, trainers, registries;
  for (const auto& p : world_.pods_of(job.namespace_, job.name)) {
    PodView v = view_of(p, world_, job);
    if (v.role == "worker") workers.push_back(v);
    else if (v.role == "trainer") trainers.push_back(v);
    else if (v.role == "registry") registries.push_back(v);
  }
  std::set<std::string> avoid;
  for (const auto& n : world_.nodes_with_notice()) avoid.insert(n);
  std::map<std::string, PoolStatus> old_pools;
  for (const auto& p : status.pools) old_pools[p.name] = p;
  std::map<std::string, const PodView*> by_name;
  for (const auto& w : workers) {
    by_name[w.name] = &w;
    if (w.notice && !w.notice->lost && !w.node.empty()) avoid.insert(w.node);
  }
  const auto capacity = observe_capacity(job);

  // Plan.
  PlacementInput in = placement_input(job, workers, old_pools, now);
  if (capacity) in.capacity = capacity->nodes;
  PlacementPlan plan = plan_workers(in);
  if (spdlog::should_log(spdlog::level::debug)) {
    std::string ws;
    for (const auto& w : in.workers)
      ws += " " + w.name + "[s" + std::to_string(w.stage) + "," + w.pool + "," + to_string(w.state) +
            (w.terminating ? ",terminating" : "") + (w.notice ? "," + w.notice->reason : "") + "]";
    spdlog::debug("{}: workers:{} -> {} delete(s), {} create(s){}", key, ws, plan.deletes.size(), plan.creates.size(),
                  capacity ? "; capacity: " + capacity_summary(*capacity) : "");
  }
  const std::vector<std::string> avoid_nodes(avoid.begin(), avoid.end());

  // Apply.
  apply_plan(job, key, plan, by_name, avoid_nodes, capacity ? capacity_summary(*capacity) : "", status, old_pools, now_s);
  keep_singletons(job, registries, 1, "registry", avoid_nodes);
  keep_singletons(job, trainers, static_cast<int>(job.spec.trainers.count), "trainer", avoid_nodes);

  // Status.
  const std::string old_phase = status.phase;
  const auto metric_workers =
      derive_status(job, in, plan, workers, trainers, capacity ? &*capacity : nullptr, old_pools, status, now_s);
  if (progress_) apply_registry_reading(job, key, status, now_s);
  // A failure the registry reported stays until a reading says otherwise (the poller stops reading
  // a Failed job's registry, so its last word stands).
  if (const Condition* failed = find_condition(status.conditions, "Failed"); failed && failed->status == "True")
    status.phase = "Failed";
  if (old_phase != status.phase)
    record(job, status.phase == "Degraded" || status.phase == "Failed" ? "Warning" : "Normal", "Phase" + status.phase,
           "phase " + old_phase + " -> " + status.phase);
  metrics_.set_job(key, status.phase, metric_workers);
  write_status(*obj, status);

  if (plan.requeue_at > 0) result.requeue_after_seconds = std::max(0.05, plan.requeue_at - now);
  return result;
}

std::map<OperatorMetrics::WorkerKey, int> Reconciler::derive_status(const SwarmJob& job, const PlacementInput& in, const PlacementPlan& plan,
                               const std::vector<PodView>& workers, const std::vector<PodView>& trainers,
                               const planner::ClusterCapacity* capacity, std::map<std::string, PoolStatus>& old_pools,
                               SwarmJobStatus& status, const std::string& now_s) {
  const std::string key = job.namespace_ + "/" + job.name;
  status.observed_generation = job.generation;
  const std::vector<StageStatus> old_stages = status.stages;
  status.stages.assign(in.stages, StageStatus{});
  for (const auto& old : old_stages) {
    // What the registry said last (progress.h) stays until it says something new.
    if (old.stage < 0 || old.stage >= in.stages) continue;
    auto& st = status.stages[old.stage];
    st.step = old.step;
    st.samples_per_second = old.samples_per_second;
    st.queue_length = old.queue_length;
    st.peers = old.peers;
  }
  status.ready_workers = 0;
  status.desired_workers = in.stages * in.per_stage;
  std::set<std::string> deleted_now;
  for (const auto& d : plan.deletes) deleted_now.insert(d.name);
  std::map<OperatorMetrics::WorkerKey, int> metric_workers;
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
  std::set<std::string> reclaimed;
  for (const auto& w : workers) {
    if (w.notice && !w.node.empty()) reclaimed.insert(w.node);
    const bool gone = w.terminating || deleted_now.count(w.name);
    metric_workers[{w.pool, w.stage, gone ? "Terminating" : to_string(w.state)}]++;
    if (gone || w.stage < 0 || w.stage >= in.stages) continue;
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
  for (const auto& c : plan.creates) ++status.stages[c.stage].pending;
  status.pools.clear();
  bool overflow = false;
  for (const auto& p : in.pools) {
    PoolStatus ps = pools[p.name];
    ps.name = p.name.empty() ? "default" : p.name;
    overflow |= !ps.available;
    status.pools.push_back(ps);
  }
  status.reclaimed_nodes.assign(reclaimed.begin(), reclaimed.end());
  int degraded_stages = 0;
  for (int s = 0; s < in.stages; ++s) {
    status.stages[s].stage = s;
    status.stages[s].desired = in.per_stage;
    if (status.stages[s].ready < job.op.min_per_stage) ++degraded_stages;
  }
  status.trainers_ready = 0;
  for (const auto& t : trainers)
    if (!t.terminating && t.state == WorkerState::Ready) ++status.trainers_ready;
  const std::string old_phase = status.phase;
  if (degraded_stages == 0) status.phase = "Running";
  else if (old_phase == "Running" || old_phase == "Degraded") status.phase = "Degraded";
  else status.phase = "Pending";
  const auto gen = job.generation;
  set_condition(status.conditions, {"SpecValid", "True", "Valid", "the spec is valid", "", gen}, now_s);
  set_condition(status.conditions,
                {"Ready", degraded_stages == 0 ? "True" : "False", degraded_stages == 0 ? "AllStagesServed" : "StagesUnderServed",
                 std::to_string(in.stages - degraded_stages) + "/" + std::to_string(in.stages) +
                     " stages have at least " + std::to_string(job.op.min_per_stage) + " ready worker(s)", "", gen},
                now_s);
  set_condition(status.conditions,
                {"Degraded", status.phase == "Degraded" ? "True" : "False",
                 status.phase == "Degraded" ? "StageBelowMinimum" : "AsExpected",
                 std::to_string(degraded_stages) + " stage(s) below spec.workers.minPerStage", "", gen}, now_s);
  set_condition(status.conditions,
                {"PoolOverflow", overflow ? "True" : "False", overflow ? "PoolUnschedulable" : "AllPoolsAvailable",
                 overflow ? "some pools cannot schedule workers; their workers run in the next pool by priority"
                          : "every pool is available", "", gen}, now_s);
  return metric_workers;
}

}  // namespace swarm::op
