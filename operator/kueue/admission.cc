#include "operator/kueue/admission.h"

#include <algorithm>
#include <set>

namespace swarm::op::kueue {
namespace {

void add_unique(json& list, const json& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

std::string names(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& n : v) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "(no flavor)" : out;
}

// One podSet's overlay into `out`; false (problem set) on an unknown flavor or a label conflict.
bool overlay_into(const WorkloadView& w, const std::string& pod_set, const std::map<std::string, Flavor>& flavors,
                  Overlay& out, std::vector<std::string>& problems) {
  for (const auto& a : w.assignments) {
    if (a.name != pod_set) continue;
    std::string problem;
    auto o = overlay_of(a, flavors, &problem);
    if (!o) {
      problems.push_back("Workload " + w.name + " podSet " + pod_set + ": " + problem);
      return false;
    }
    out = *o;
    return true;
  }
  problems.push_back("Workload " + w.name + " has no admission for podSet " + pod_set);
  return false;
}

// Stage s's share of `count` workers spread over `stages` (in order: the first ones one more).
int share(int count, size_t index, size_t stages) {
  const int n = static_cast<int>(stages);
  return count / n + (static_cast<int>(index) < count % n ? 1 : 0);
}

}  // namespace

Flavor flavor_view(const json& obj) {
  Flavor f;
  f.name = obj.value("metadata", json::object()).value("name", "");
  const json spec = obj.value("spec", json::object());
  const json labels = spec.value("nodeLabels", json::object());  // items() must not outlive it
  for (const auto& [k, v] : labels.items())
    if (v.is_string()) f.node_labels[k] = v.get<std::string>();
  const json tol = spec.value("tolerations", json::array());
  if (tol.is_array()) f.tolerations = tol;
  return f;
}

std::optional<Overlay> overlay_of(const PodSetAssignment& a, const std::map<std::string, Flavor>& flavors,
                                  std::string* problem) {
  Overlay o;
  std::set<std::string> seen;
  for (const auto& [resource, name] : a.flavors) {
    if (!seen.insert(name).second) continue;
    auto it = flavors.find(name);
    if (it == flavors.end()) {
      if (problem) *problem = "ResourceFlavor \"" + name + "\" (assigned for " + resource + ") is not known";
      return std::nullopt;
    }
    for (const auto& [k, v] : it->second.node_labels) {
      auto [at, fresh] = o.node_selector.emplace(k, v);
      if (!fresh && at->second != v) {
        if (problem)
          *problem = "ResourceFlavors assigned together set node label " + k + " to \"" + at->second + "\" and \"" +
                     v + "\"";
        return std::nullopt;
      }
    }
    for (const auto& t : it->second.tolerations) add_unique(o.tolerations, t);
    o.flavors.push_back(name);
  }
  std::sort(o.flavors.begin(), o.flavors.end());
  return o;
}

void apply_overlay(json& pod, const Overlay& o) {
  json& spec = pod["spec"];
  if (!o.node_selector.empty()) {
    if (!spec.contains("nodeSelector") || !spec["nodeSelector"].is_object()) spec["nodeSelector"] = json::object();
    for (const auto& [k, v] : o.node_selector) spec["nodeSelector"][k] = v;
  }
  if (!o.tolerations.empty()) {
    if (!spec.contains("tolerations") || !spec["tolerations"].is_array()) spec["tolerations"] = json::array();
    for (const auto& t : o.tolerations) add_unique(spec["tolerations"], t);
  }
}

std::vector<NodePool> pools_within(const std::vector<NodePool>& pools, const Overlay& o) {
  std::vector<NodePool> out;
  for (NodePool p : pools) {
    std::map<std::string, std::string> sel = p.node_selector;
    if (!p.region.empty()) sel["topology.kubernetes.io/region"] = p.region;
    if (!p.zone.empty()) sel["topology.kubernetes.io/zone"] = p.zone;
    bool conflict = false;
    for (const auto& [k, v] : o.node_selector) {
      auto it = sel.find(k);
      conflict |= it != sel.end() && it->second != v;
    }
    if (conflict) continue;
    for (const auto& [k, v] : o.node_selector) p.node_selector[k] = v;
    for (const auto& t : o.tolerations) add_unique(p.tolerations, t);
    out.push_back(std::move(p));
  }
  if (!out.empty()) return out;
  // Nothing of spec.nodePools fits: anywhere in the flavor, in one pool named after it.
  NodePool any;
  any.name = o.flavors.empty() ? "" : o.flavors.front();
  any.node_selector = o.node_selector;
  any.tolerations = o.tolerations;
  return {any};
}

Envelope envelope(const SwarmJob& job, const std::vector<WorkerGroup>& groups, const WorkloadView& core,
                  const std::vector<WorkloadView>& extensions, const std::map<std::string, Flavor>& flavors) {
  Envelope e;
  e.cluster_queue = core.cluster_queue;
  const size_t stages = static_cast<size_t>(job.spec.pipeline.stages);
  e.workers_per_stage.assign(stages, 0);
  e.registries = core.admitted_count("registry");
  e.trainers = core.admitted_count("trainers");
  overlay_into(core, "registry", flavors, e.registry, e.problems);
  overlay_into(core, "trainers", flavors, e.trainers_overlay, e.problems);
  int workers = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const WorkerGroup& group = groups[g];
    Overlay o;
    if (!overlay_into(core, group.pod_set, flavors, o, e.problems)) continue;
    if (g == 0) e.workers = o;
    else if (!(o == e.workers))
      e.problems.push_back("worker podSets " + groups[0].pod_set + " and " + group.pod_set +
                           " were admitted on different flavors (" + names(e.workers.flavors) + " and " +
                           names(o.flavors) + "): one job's workers run on one flavor");
    const int core_count = core.admitted_count(group.pod_set);
    int ext_count = 0;
    for (const auto& x : extensions) {
      Overlay xo;
      std::vector<std::string> ignored;
      if (!overlay_into(x, group.pod_set, flavors, xo, ignored)) continue;  // not this group's extension
      if (!(xo == o)) {
        e.refused_extensions.push_back(x.name);
        continue;
      }
      ext_count += x.admitted_count(group.pod_set);
    }
    for (size_t i = 0; i < group.stages.size(); ++i) {
      const size_t s = static_cast<size_t>(group.stages[i]);
      if (s >= stages) continue;
      e.workers_per_stage[s] = share(core_count, i, group.stages.size()) + share(ext_count, i, group.stages.size());
    }
    workers += core_count + ext_count;
  }
  e.summary = "workers " + std::to_string(workers) + " on " + names(e.workers.flavors) + "; trainers " +
              std::to_string(e.trainers) + " on " + names(e.trainers_overlay.flavors) + "; registry on " +
              names(e.registry.flavors);
  return e;
}

}  // namespace swarm::op::kueue
