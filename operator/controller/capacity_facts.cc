#include "operator/controller/capacity_facts.h"

#include <algorithm>
#include <stdexcept>

#include "operator/api/quantity.h"
#include "operator/controller/manifests.h"
#include "operator/controller/reclaim.h"

namespace swarm::op {
namespace {

double quantity(const json& v, const std::string& field) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) throw std::invalid_argument(field + ": must be a quantity, got " + v.dump());
  try {
    return parse_quantity(v.get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(field + ": " + e.what());
  }
}

// A container's requests, with its limits standing in for missing ones.
planner::Resources container_requests(const json& resources, const std::string& field) {
  if (!resources.is_object()) return {};
  planner::Resources r = resources_of(resources.value("limits", json::object()), field + ".limits");
  for (const auto& [k, v] : resources_of(resources.value("requests", json::object()), field + ".requests")) r[k] = v;
  return r;
}

planner::Resources lenient_requests(const json& resources) {
  try {
    return container_requests(resources, "resources");
  } catch (const std::invalid_argument&) {
    return {};
  }
}

}  // namespace

planner::Resources resources_of(const json& list, const std::string& field) {
  planner::Resources out;
  if (!list.is_object()) return out;
  for (const auto& [name, v] : list.items()) out[name] = quantity(v, field + "." + name);
  return out;
}

planner::Resources pod_requests(const json& pod) {
  const json spec = pod.value("spec", json::object());
  planner::Resources sum;
  for (const auto& c : spec.value("containers", json::array()))
    for (const auto& [k, v] : lenient_requests(c.value("resources", json::object()))) sum[k] += v;
  for (const auto& c : spec.value("initContainers", json::array()))
    for (const auto& [k, v] : lenient_requests(c.value("resources", json::object()))) sum[k] = std::max(sum[k], v);
  try {
    for (const auto& [k, v] : resources_of(spec.value("overhead", json::object()), "spec.overhead")) sum[k] += v;
  } catch (const std::invalid_argument&) {
  }
  return sum;
}

std::optional<planner::BoundPod> bound_pod(const json& pod) {
  const std::string node = pod.value("spec", json::object()).value("nodeName", "");
  const std::string phase = pod.value("status", json::object()).value("phase", "");
  if (node.empty() || phase == "Succeeded" || phase == "Failed") return std::nullopt;
  if (pod.contains("requests") && pod["requests"].is_object()) {
    planner::BoundPod b{node, {}};
    for (const auto& [k, v] : pod["requests"].items())
      if (v.is_number()) b.requests[k] = v.get<double>();
    return b;
  }
  return planner::BoundPod{node, pod_requests(pod)};
}

json capacity_view(const json& pod) {
  const json md = pod.value("metadata", json::object());
  json view_md = json::object();
  for (const char* k : {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp"})
    if (md.contains(k)) view_md[k] = md[k];
  json requests = json::object();
  for (const auto& [k, v] : pod_requests(pod)) requests[k] = v;
  const json labels = md.value("labels", json::object());
  if (labels.value(kLabelManagedBy, "") == kManagedByValue) view_md["labels"] = {{kLabelManagedBy, kManagedByValue}};
  return {{"metadata", view_md},
          {"spec", {{"nodeName", pod.value("spec", json::object()).value("nodeName", "")}}},
          {"status", {{"phase", pod.value("status", json::object()).value("phase", "")}}},
          {"requests", requests}};
}

planner::NodeFacts node_facts(const json& node) {
  planner::NodeFacts n;
  const json md = node.value("metadata", json::object());
  const json spec = node.value("spec", json::object());
  const json status = node.value("status", json::object());
  n.name = md.value("name", "");
  const json labels = md.value("labels", json::object());  // items() of a temporary would dangle
  for (const auto& [k, v] : labels.items())
    if (v.is_string()) n.labels[k] = v.get<std::string>();
  for (const auto& t : spec.value("taints", json::array()))
    n.taints.push_back({t.value("key", ""), t.value("value", ""), t.value("effect", "")});
  try {
    n.allocatable = resources_of(status.value("allocatable", json::object()), "status.allocatable");
  } catch (const std::invalid_argument&) {
    n.allocatable.clear();  // the API server validated it; a node we cannot read has no room for us
  }
  n.ready = false;
  for (const auto& c : status.value("conditions", json::array()))
    if (c.value("type", "") == "Ready") n.ready = c.value("status", "") == "True";
  n.cordoned = spec.value("unschedulable", false);
  n.deleting = md.contains("deletionTimestamp");
  const auto notice = node_notice(node);
  n.under_notice = notice && !notice->lost;
  return n;
}

planner::PoolSelector pool_selector(const NodePool* pool) {
  planner::PoolSelector s;
  if (!pool) return s;
  s.name = pool->name;
  s.node_selector = pool->node_selector;
  if (!pool->region.empty()) s.node_selector["topology.kubernetes.io/region"] = pool->region;
  if (!pool->zone.empty()) s.node_selector["topology.kubernetes.io/zone"] = pool->zone;
  for (const auto& t : pool->tolerations)
    s.tolerations.push_back({t.value("key", ""), t.value("operator", "Equal"), t.value("value", ""), t.value("effect", "")});
  s.max_workers = pool->max_workers;
  return s;
}

planner::Resources worker_request(const SwarmJob& job) {
  return container_requests(job.op.workers.resources, "spec.workers.resources");
}

}  // namespace swarm::op
