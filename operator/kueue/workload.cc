#include "operator/kueue/workload.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace swarm::op::kueue {
namespace {

// What the pods' labels say, in the objects' own words (operator/controller/manifests.h sets the
// same on every object of a job).
constexpr const char* kManagedBy = "app.kubernetes.io/managed-by";
constexpr const char* kManagedByValue = "swarm-operator";
constexpr const char* kJobLabel = "swarm-operator.io/job";

// A pool's node selector as its pods get it: its own entries plus region and zone.
std::map<std::string, std::string> pool_selector(const NodePool& p) {
  std::map<std::string, std::string> s = p.node_selector;
  if (!p.region.empty()) s["topology.kubernetes.io/region"] = p.region;
  if (!p.zone.empty()) s["topology.kubernetes.io/zone"] = p.zone;
  return s;
}

// The entries every pool sets alike: what a worker's node has, whichever pool it lands in.
std::map<std::string, std::string> common_selector(const std::vector<NodePool>& pools) {
  if (pools.empty()) return {};
  std::map<std::string, std::string> common = pool_selector(pools.front());
  for (size_t i = 1; i < pools.size(); ++i) {
    const auto other = pool_selector(pools[i]);
    for (auto it = common.begin(); it != common.end();) {
      auto o = other.find(it->first);
      it = (o == other.end() || o->second != it->second) ? common.erase(it) : std::next(it);
    }
  }
  return common;
}

void add_unique(json& list, const json& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

json metadata(const SwarmJob& job, const std::string& name, Role role, const json& owner) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", {{kManagedBy, kManagedByValue}, {kJobLabel, job.name}, {kLabelWorkload, to_string(role)}}},
          {"ownerReferences", json::array({owner})},
          {"finalizers", json::array({kResourceInUseFinalizer})}};
}

json condition_json(const Condition& c) {
  return {{"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message},
          {"lastTransitionTime", c.last_transition_time}, {"observedGeneration", c.observed_generation}};
}

json conditions_json(const std::vector<Condition>& conds) {
  json out = json::array();
  for (const auto& c : conds) out.push_back(condition_json(c));
  return out;
}

// Kueue's condition messages are at most 32 KiB (api.TruncateConditionMessage); ours are short, but
// a Kueue message copied in could be long.
std::string truncate_message(std::string m) {
  constexpr size_t kMax = 32 * 1024;
  if (m.size() > kMax) m.resize(kMax);
  return m;
}

}  // namespace

const char* to_string(Role r) { return r == Role::Core ? "core" : "extension"; }

std::string queue_name(const SwarmJob& job) {
  auto it = job.labels.find(kQueueNameLabel);
  return it == job.labels.end() ? "" : it->second;
}

std::optional<std::string> queue_name_problem(const SwarmJob& job) {
  auto it = job.labels.find(kQueueNameLabel);
  if (it == job.labels.end() || is_dns1123_subdomain(it->second)) return std::nullopt;
  return std::string("metadata.labels[") + kQueueNameLabel + "]: must name a LocalQueue (a DNS-1123 subdomain: " +
         "lowercase letters, digits, '-' and '.'), got \"" + it->second + "\"";
}

json pod_set_template(const json& pod) {
  const json spec = pod.value("spec", json::object());
  json out = json::object();
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list)) continue;
    json cs = json::array();
    for (const auto& c : spec[list]) {
      json slim = {{"name", c.value("name", "")}, {"image", c.value("image", "")}};
      if (c.contains("resources")) slim["resources"] = c["resources"];
      cs.push_back(slim);
    }
    out[list] = cs;
  }
  for (const char* field : {"nodeSelector", "tolerations", "overhead", "priorityClassName", "runtimeClassName"})
    if (spec.contains(field)) out[field] = spec[field];
  return {{"spec", out}};
}

std::vector<WorkerGroup> worker_groups(const SwarmJob& job, const JobTemplates& t) {
  const auto common = common_selector(job.op.pools);
  json tolerations = json::array();
  for (const auto& p : job.op.pools)
    for (const auto& tol : p.tolerations) add_unique(tolerations, tol);
  std::vector<WorkerGroup> groups;
  for (size_t s = 0; s < t.worker_by_stage.size(); ++s) {
    json tmpl = pod_set_template(t.worker_by_stage[s]);
    for (const auto& [k, v] : common) tmpl["spec"]["nodeSelector"][k] = v;
    if (!tolerations.empty()) {
      json& tl = tmpl["spec"]["tolerations"];
      if (!tl.is_array()) tl = json::array();
      for (const auto& tol : tolerations) add_unique(tl, tol);
    }
    auto same = std::find_if(groups.begin(), groups.end(), [&](const WorkerGroup& g) { return g.pod_template == tmpl; });
    if (same != groups.end()) {
      same->stages.push_back(static_cast<int>(s));
    } else {
      groups.push_back({"", {static_cast<int>(s)}, tmpl});
    }
  }
  if (groups.size() > static_cast<size_t>(kMaxPodSets - 2))
    throw std::invalid_argument("the workers of the " + std::to_string(t.worker_by_stage.size()) +
                                " stages ask for " + std::to_string(groups.size()) +
                                " different pod templates; a Workload holds at most " +
                                std::to_string(kMaxPodSets) + " podSets (registry and trainers take 2)");
  for (size_t i = 0; i < groups.size(); ++i)
    groups[i].pod_set = groups.size() == 1 ? "workers" : "workers-" + std::to_string(i);
  return groups;
}

std::string core_name(const SwarmJob& job) { return job.name + "-core"; }

std::string extension_name(const SwarmJob& job, size_t group, size_t groups) {
  return groups <= 1 ? job.name + "-ext" : job.name + "-ext-" + std::to_string(group);
}

json core_workload(const SwarmJob& job, const JobTemplates& t, const std::optional<Priority>& priority) {
  json pod_sets = json::array();
  pod_sets.push_back({{"name", "registry"}, {"count", 1}, {"template", pod_set_template(t.registry)}});
  pod_sets.push_back(
      {{"name", "trainers"}, {"count", job.spec.trainers.count}, {"template", pod_set_template(t.trainer)}});
  for (const auto& g : worker_groups(job, t))
    pod_sets.push_back({{"name", g.pod_set},
                        {"count", job.op.min_per_stage * static_cast<int>(g.stages.size())},
                        {"template", g.pod_template}});
  json spec = {{"queueName", queue_name(job)}, {"podSets", pod_sets}, {"active", true}};
  if (priority) {
    spec["priorityClassRef"] = {{"group", kGroup}, {"kind", "WorkloadPriorityClass"}, {"name", priority->class_name}};
    spec["priority"] = priority->value;
  }
  return {{"apiVersion", kGroupVersion},
          {"kind", "Workload"},
          {"metadata", metadata(job, core_name(job), Role::Core, t.owner_reference)},
          {"spec", spec}};
}

std::int32_t extension_priority(const std::optional<Priority>& priority) {
  const std::int32_t base = priority ? priority->value : 0;
  return base == std::numeric_limits<std::int32_t>::min() ? base : base - 1;
}

std::optional<json> extension_workload(const SwarmJob& job, const std::vector<WorkerGroup>& groups, size_t g,
                                       const std::optional<Priority>& priority,
                                       const std::map<std::string, std::string>& pin, const json& owner_reference) {
  const int extra = effective_max_per_stage(job) - job.op.min_per_stage;
  if (extra <= 0 || g >= groups.size()) return std::nullopt;
  const WorkerGroup& group = groups[g];
  json tmpl = group.pod_template;
  for (const auto& [k, v] : pin) tmpl["spec"]["nodeSelector"][k] = v;
  json pod_set = {{"name", group.pod_set},
                  {"count", extra * static_cast<int>(group.stages.size())},
                  {"minCount", 1},
                  {"template", tmpl}};
  // No priorityClassRef: Kueue keeps a Workload's priority equal to its class's value, and an
  // extension must stay below its core. The class is named in an annotation, for people.
  json md = metadata(job, extension_name(job, g, groups.size()), Role::Extension, owner_reference);
  if (priority) md["annotations"] = {{"swarm-operator.io/priority-class", priority->class_name}};
  json spec = {{"queueName", queue_name(job)},
               {"podSets", json::array({pod_set})},
               {"active", true},
               {"priority", extension_priority(priority)}};
  return json{{"apiVersion", kGroupVersion}, {"kind", "Workload"}, {"metadata", md}, {"spec", spec}};
}

bool WorkloadView::is_true(const std::string& type) const {
  const Condition* c = condition(type);
  return c && c->status == "True";
}

bool WorkloadView::has_finalizer() const {
  return std::find(finalizers.begin(), finalizers.end(), kResourceInUseFinalizer) != finalizers.end();
}

int WorkloadView::admitted_count(const std::string& pod_set) const {
  for (const auto& a : assignments)
    if (a.name == pod_set) return a.count;
  return 0;
}

WorkloadView workload_view(const json& obj) {
  WorkloadView w;
  const json md = obj.value("metadata", json::object());
  w.name = md.value("name", "");
  w.namespace_ = md.value("namespace", "");
  w.uid = md.value("uid", "");
  w.resource_version = md.value("resourceVersion", "");
  w.generation = md.value("generation", 0LL);
  w.deleting = md.contains("deletionTimestamp");
  for (const auto& f : md.value("finalizers", json::array()))
    if (f.is_string()) w.finalizers.push_back(f.get<std::string>());
  for (const auto& o : md.value("ownerReferences", json::array()))
    if (o.value("controller", false)) w.owner_uid = o.value("uid", "");
  const std::string role = md.value("labels", json::object()).value(kLabelWorkload, "");
  if (role == "core") w.role = Role::Core;
  if (role == "extension") w.role = Role::Extension;
  const json spec = obj.value("spec", json::object());
  w.queue_name = spec.value("queueName", "");
  w.active = spec.value("active", true);
  if (spec.contains("priority") && spec["priority"].is_number_integer()) w.priority = spec["priority"].get<std::int32_t>();
  for (const auto& ps : spec.value("podSets", json::array())) w.pod_sets.emplace_back(ps.value("name", "main"), ps.value("count", 1));
  const json status = obj.value("status", json::object());
  for (const auto& c : status.value("conditions", json::array()))
    w.conditions.push_back({c.value("type", ""), c.value("status", ""), c.value("reason", ""), c.value("message", ""),
                            c.value("lastTransitionTime", ""), c.value("observedGeneration", 0LL)});
  if (status.contains("admission") && status["admission"].is_object()) {
    w.has_admission = true;
    const json& a = status["admission"];
    w.cluster_queue = a.value("clusterQueue", "");
    for (const auto& psa : a.value("podSetAssignments", json::array())) {
      PodSetAssignment pa;
      pa.name = psa.value("name", "");
      // count absent: the podSet's own count (Kueue's podset.FromAssignment reads it the same way).
      pa.count = psa.contains("count") && psa["count"].is_number_integer() ? psa["count"].get<int>() : -1;
      if (pa.count < 0)
        for (const auto& [n, c] : w.pod_sets)
          if (n == pa.name) pa.count = c;
      pa.count = std::max(0, pa.count);
      const json flavors = psa.value("flavors", json::object());  // items() must not outlive it
      for (const auto& [res, fl] : flavors.items())
        if (fl.is_string()) pa.flavors[res] = fl.get<std::string>();
      w.assignments.push_back(pa);
    }
  }
  return w;
}

json clear_admission_patch(const WorkloadView& w, const std::string& now) {
  std::vector<Condition> conds = w.conditions;
  const Condition* ev = w.condition("Evicted");
  const std::string reason = ev ? ev->reason : "Pending";
  const std::string message = truncate_message(ev ? ev->message : "the workload's pods are gone");
  // Kueue's jobframework requeues a workload evicted by preemption or node failures; any other
  // eviction (deactivated, a stopped queue...) leaves it for whoever stopped it.
  const bool requeue = reason == "Preempted" || reason == "NodeFailures";
  set_condition(conds, {"QuotaReserved", "False", "Pending", message, "", w.generation}, now);
  set_condition(conds, {"Admitted", "False", "NoReservation", "The workload has no reservation", "", w.generation}, now);
  set_condition(conds, {"Requeued", requeue ? "True" : "False", reason, message, "", w.generation}, now);
  return {{"metadata", {{"resourceVersion", w.resource_version}}},
          {"status", {{"admission", nullptr}, {"conditions", conditions_json(conds)}}}};
}

json finished_patch(const WorkloadView& w, bool succeeded, const std::string& message, const std::string& now) {
  std::vector<Condition> conds = w.conditions;
  set_condition(conds, {"Finished", "True", succeeded ? "Succeeded" : "Failed", truncate_message(message), "", w.generation},
                now);
  return {{"metadata", {{"resourceVersion", w.resource_version}}}, {"status", {{"conditions", conditions_json(conds)}}}};
}

json release_patch(const WorkloadView& w) {
  json keep = json::array();
  for (const auto& f : w.finalizers)
    if (f != kResourceInUseFinalizer) keep.push_back(f);
  return {{"metadata", {{"resourceVersion", w.resource_version}, {"finalizers", keep}}}};
}

}  // namespace swarm::op::kueue
