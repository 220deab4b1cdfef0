#include "operator/controller/reclaim.h"

namespace swarm::op {
namespace {

bool has_taint(const json& node, const std::string& key, const std::string& value = "") {
  const json spec = node.value("spec", json::object());
  for (const auto& t : spec.value("taints", json::array())) {
    if (t.value("key", "") == key && (value.empty() || t.value("value", "") == value)) return true;
  }
  return false;
}

std::string label(const json& obj, const std::string& key) {
  const json md = obj.value("metadata", json::object());
  const json labels = md.value("labels", json::object());
  auto it = labels.find(key);
  return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

Notice node_deleted_notice() { return {"NodeDeleted", 0, true}; }

std::optional<Notice> node_notice(const json& node) {
  // Dead already: act at once, there is nobody left to drain.
  const json status = node.value("status", json::object());
  for (const auto& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == "Ready" && c.value("status", "") != "True") return Notice{"NodeNotReady", 0, true};
  }
  if (has_taint(node, "cloud.google.com/impending-node-termination"))
    return Notice{"GKESpotTermination", kDefaultGraceSeconds, false};
  if (has_taint(node, "karpenter.sh/disrupted") || has_taint(node, "karpenter.sh/disruption", "disrupting"))
    return Notice{"KarpenterDisruption", kAwsGraceSeconds, false};
  if (has_taint(node, "aws-node-termination-handler/spot-itn"))
    return Notice{"AWSSpotInterruption", kAwsGraceSeconds, false};
  if (has_taint(node, "remediator.kubernetes.azure.com/unschedulable") &&
      label(node, "kubernetes.azure.com/scalesetpriority") == "spot")
    return Notice{"AKSSpotEviction", kDefaultGraceSeconds, false};
  const json md = node.value("metadata", json::object());
  const bool deleting = md.contains("deletionTimestamp");
  const bool cordoned = node.value("spec", json::object()).value("unschedulable", false);
  if (label(node, "cloud.google.com/gke-spot") == "true" && (deleting || cordoned))
    return Notice{"GKESpotShutdown", kDefaultGraceSeconds, false};
  if (deleting) return Notice{"NodeDeleting", kDefaultGraceSeconds, false};
  return std::nullopt;
}

bool unknown_after_api_outage(const json& node, double seconds_since_api_back) {
  if (seconds_since_api_back < 0 || seconds_since_api_back >= kApiBackGraceSeconds) return false;
  const json status = node.value("status", json::object());
  for (const auto& c : status.value("conditions", json::array()))
    if (c.value("type", "") == "Ready") return c.value("status", "") == "Unknown";
  return false;
}

std::optional<Notice> pod_notice(const json& pod) {
  const json status = pod.value("status", json::object());
  const std::string phase = status.value("phase", "");
  if (phase == "Failed" || phase == "Succeeded") return Notice{"PodFailed", 0, true};
  for (const auto& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == "DisruptionTarget" && c.value("status", "") == "True")
      return Notice{"DisruptionTarget", kDefaultGraceSeconds, false};
  }
  return std::nullopt;
}

}  // namespace swarm::op
