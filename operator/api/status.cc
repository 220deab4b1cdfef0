#include "operator/api/status.h"

namespace swarm::op {

json to_json(const SwarmJobStatus& s) {
  json j = {{"phase", s.phase},
            {"observedGeneration", s.observed_generation},
            {"workersReady", std::to_string(s.ready_workers) + "/" + std::to_string(s.desired_workers)},
            {"readyWorkers", s.ready_workers},
            {"desiredWorkers", s.desired_workers},
            {"trainersReady", s.trainers_ready},
            {"step", s.step},
            {"samplesPerSecond", s.samples_per_second},
            {"preemptions", s.preemptions},
            {"stageReassignments", s.stage_reassignments}};
  // No loss until a trainer reported one: 0 would read as a perfect model (and a watcher waiting for
  // the loss to fall below its first reading would wait below 0 forever).
  if (s.loss > 0) j["loss"] = s.loss;
  j["conditions"] = json::array();
  for (const auto& c : s.conditions) {
    j["conditions"].push_back({{"type", c.type}, {"status", c.status}, {"reason", c.reason},
                               {"message", c.message}, {"lastTransitionTime", c.last_transition_time},
                               {"observedGeneration", c.observed_generation}});
  }
  j["stages"] = json::array();
  for (const auto& st : s.stages) {
    j["stages"].push_back({{"stage", st.stage}, {"ready", st.ready}, {"desired", st.desired},
                           {"pending", st.pending}, {"samplesPerSecond", st.samples_per_second},
                           {"step", st.step}, {"queueLength", st.queue_length}, {"peers", st.peers}});
  }
  j["pools"] = json::array();
  for (const auto& p : s.pools) {
    json pj = {{"name", p.name}, {"ready", p.ready}, {"workers", p.workers},
               {"unschedulable", p.unschedulable}, {"available", p.available}};
    if (!p.unavailable_since.empty()) pj["unavailableSince"] = p.unavailable_since;
    if (!p.retry_at.empty()) pj["retryAt"] = p.retry_at;
    if (!p.reason.empty()) pj["reason"] = p.reason;
    if (p.capacity_known) {
      pj["nodes"] = p.nodes;
      pj["nodesUnderNotice"] = p.nodes_under_notice;
      pj["nodesUnavailable"] = p.nodes_unavailable;
      pj["freeSlots"] = p.free_slots;
      pj["usedSlots"] = p.used_slots;
    }
    j["pools"].push_back(pj);
  }
  if (!s.last_preemption_time.empty()) j["lastPreemptionTime"] = s.last_preemption_time;
  j["reclaimedNodes"] = s.reclaimed_nodes;
  if (!s.last_step_time.empty()) j["lastStepTime"] = s.last_step_time;
  if (!s.progress_read_time.empty()) j["progressReadTime"] = s.progress_read_time;
  j["rebalanceMoves"] = s.rebalance_moves;
  j["swarmEvents"] = s.swarm_events;
  if (!s.exported_model.empty()) {
    j["exportedModel"] = s.exported_model;
    j["exportedStep"] = s.exported_step;
  }
  if (s.queue) {
    const QueueStatus& q = *s.queue;
    json qj = {{"name", q.name}, {"workloads", q.workloads}, {"admittedWorkers", q.admitted_workers},
               {"evictions", q.evictions}};
    if (!q.cluster_queue.empty()) qj["clusterQueue"] = q.cluster_queue;
    if (!q.admission.empty()) qj["admission"] = q.admission;
    if (!q.last_eviction_time.empty())
      qj["lastEviction"] = {{"reason", q.last_eviction_reason}, {"message", q.last_eviction_message},
                            {"time", q.last_eviction_time}};
    j["queue"] = qj;
  }
  return j;
}

SwarmJobStatus status_from_json(const json& j) {
  SwarmJobStatus s;
  if (!j.is_object()) return s;
  s.phase = j.value("phase", "Pending");
  s.observed_generation = j.value("observedGeneration", 0LL);
  s.ready_workers = j.value("readyWorkers", 0);
  s.desired_workers = j.value("desiredWorkers", 0);
  s.trainers_ready = j.value("trainersReady", 0);
  s.step = j.value("step", 0LL);
  s.samples_per_second = j.value("samplesPerSecond", 0.0);
  s.loss = j.value("loss", 0.0);
  s.preemptions = j.value("preemptions", 0LL);
  s.last_preemption_time = j.value("lastPreemptionTime", "");
  s.stage_reassignments = j.value("stageReassignments", 0LL);
  for (const auto& c : j.value("conditions", json::array())) {
    s.conditions.push_back({c.value("type", ""), c.value("status", ""), c.value("reason", ""),
                            c.value("message", ""), c.value("lastTransitionTime", ""),
                            c.value("observedGeneration", 0LL)});
  }
  for (const auto& st : j.value("stages", json::array())) {
    StageStatus ss{st.value("stage", 0), st.value("ready", 0), st.value("desired", 0), st.value("pending", 0),
                   st.value("samplesPerSecond", 0.0)};
    ss.step = st.value("step", 0LL);
    ss.queue_length = st.value("queueLength", 0LL);
    ss.peers = st.value("peers", 0);
    s.stages.push_back(ss);
  }
  for (const auto& p : j.value("pools", json::array())) {
    PoolStatus ps;
    ps.name = p.value("name", "");
    ps.ready = p.value("ready", 0);
    ps.workers = p.value("workers", 0);
    ps.unschedulable = p.value("unschedulable", 0);
    ps.available = p.value("available", true);
    ps.unavailable_since = p.value("unavailableSince", "");
    ps.retry_at = p.value("retryAt", "");
    ps.reason = p.value("reason", "");
    ps.capacity_known = p.contains("freeSlots");
    ps.nodes = p.value("nodes", 0);
    ps.nodes_under_notice = p.value("nodesUnderNotice", 0);
    ps.nodes_unavailable = p.value("nodesUnavailable", 0);
    ps.free_slots = p.value("freeSlots", 0);
    ps.used_slots = p.value("usedSlots", 0);
    s.pools.push_back(ps);
  }
  for (const auto& n : j.value("reclaimedNodes", json::array())) s.reclaimed_nodes.push_back(n.get<std::string>());
  s.last_step_time = j.value("lastStepTime", "");
  s.progress_read_time = j.value("progressReadTime", "");
  s.rebalance_moves = j.value("rebalanceMoves", 0LL);
  const json events = j.value("swarmEvents", json::object());
  if (events.is_object())
    for (const auto& [kind, count] : events.items())
      if (count.is_number_integer()) s.swarm_events[kind] = count.get<std::int64_t>();
  if (j.contains("exportedModel") && j["exportedModel"].is_string()) {
    s.exported_model = j["exportedModel"].get<std::string>();
    if (j.contains("exportedStep") && j["exportedStep"].is_number_integer())
      s.exported_step = j["exportedStep"].get<std::int64_t>();
  }
  if (j.contains("queue") && j["queue"].is_object()) {
    const json& qj = j["queue"];
    QueueStatus q;
    q.name = qj.value("name", "");
    q.cluster_queue = qj.value("clusterQueue", "");
    for (const auto& w : qj.value("workloads", json::array()))
      if (w.is_string()) q.workloads.push_back(w.get<std::string>());
    q.admitted_workers = qj.value("admittedWorkers", 0);
    q.admission = qj.value("admission", "");
    q.evictions = qj.value("evictions", 0LL);
    const json last = qj.value("lastEviction", json::object());
    q.last_eviction_reason = last.value("reason", "");
    q.last_eviction_message = last.value("message", "");
    q.last_eviction_time = last.value("time", "");
    s.queue = q;
  }
  return s;
}

const Condition* find_condition(const std::vector<Condition>& conds, const std::string& type) {
  for (const auto& c : conds)
    if (c.type == type) return &c;
  return nullptr;
}

void set_condition(std::vector<Condition>& conds, Condition c, const std::string& now) {
  for (auto& old : conds) {
    if (old.type != c.type) continue;
    c.last_transition_time = (old.status == c.status && !old.last_transition_time.empty())
                                 ? old.last_transition_time : now;
    old = std::move(c);
    return;
  }
  c.last_transition_time = now;
  conds.push_back(std::move(c));
}

}  // namespace swarm::op
