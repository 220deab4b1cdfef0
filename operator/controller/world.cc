#include "operator/controller/world.h"

#include <set>

#include "operator/controller/capacity_facts.h"
#include "operator/controller/manifests.h"

namespace swarm::op {

std::optional<Notice> World::notice_for_node(const std::string& node) const {
  auto n = nodes.get(node);
  if (!n) return nodes.synced() ? std::optional<Notice>(node_deleted_notice()) : std::nullopt;
  if (unknown_after_api_outage(*n, seconds_since_api_back())) return std::nullopt;
  return node_notice(*n);
}

void World::note_api_back() {
  swarm::MutexLock lock(mu_);
  api_back_ = Clock::now();
}

double World::seconds_since_api_back() const {
  swarm::MutexLock lock(mu_);
  if (!api_back_) return -1;
  return std::chrono::duration<double>(Clock::now() - *api_back_).count();
}

bool World::capacity_known() const { return bound_pods && bound_pods->synced() && nodes.synced(); }

std::vector<planner::NodeFacts> World::node_facts() const {
  std::vector<planner::NodeFacts> out;
  nodes.for_each([&](const kube::json& n) { out.push_back(op::node_facts(n)); });
  return out;
}

std::vector<planner::BoundPod> World::pods_on_nodes() const {
  std::vector<planner::BoundPod> out;
  if (!bound_pods) return out;
  bound_pods->for_each([&](const kube::json& p) {
    if (auto b = bound_pod(p)) out.push_back(std::move(*b));
  });
  return out;
}

std::vector<std::string> World::nodes_with_notice() const {
  std::vector<std::string> out;
  const double since_api_back = seconds_since_api_back();
  nodes.for_each([&](const kube::json& n) {
    if (node_notice(n) && !unknown_after_api_outage(n, since_api_back)) out.push_back(n["metadata"].value("name", ""));
  });
  return out;
}

void World::note_notice(const std::string& key) {
  swarm::MutexLock lock(mu_);
  notices_.emplace(key, Clock::now());
}

void World::clear_notice(const std::string& key) {
  swarm::MutexLock lock(mu_);
  notices_.erase(key);
}

double World::notice_age(const std::string& key) const {
  swarm::MutexLock lock(mu_);
  auto it = notices_.find(key);
  if (it == notices_.end()) return 0;
  return std::chrono::duration<double>(Clock::now() - it->second).count();
}

void World::note_deleted(const std::string& pod_key) {
  swarm::MutexLock lock(mu_);
  const auto now = Clock::now();
  for (auto it = deleted_.begin(); it != deleted_.end();) {
    it = now - it->second > std::chrono::seconds(60) ? deleted_.erase(it) : std::next(it);
  }
  deleted_[pod_key] = now;
}

bool World::recently_deleted(const std::string& pod_key) const {
  swarm::MutexLock lock(mu_);
  auto it = deleted_.find(pod_key);
  return it != deleted_.end() && Clock::now() - it->second < std::chrono::seconds(60);
}

std::vector<kube::json> World::pods_of(const std::string& ns, const std::string& job) const {
  std::vector<kube::json> out;
  pods.for_each([&](const kube::json& p) {
    const auto& md = p["metadata"];
    if (md.value("namespace", "") != ns) return;
    auto labels = md.value("labels", kube::json::object());
    if (labels.value(kLabelJob, "") == job) out.push_back(p);
  });
  return out;
}

std::vector<std::string> World::jobs_on_node(const std::string& node) const {
  std::set<std::string> keys;
  pods.for_each([&](const kube::json& p) {
    if (p["spec"].value("nodeName", "") != node) return;
    auto labels = p["metadata"].value("labels", kube::json::object());
    const std::string job = labels.value(kLabelJob, "");
    if (!job.empty()) keys.insert(p["metadata"].value("namespace", "") + "/" + job);
  });
  return {keys.begin(), keys.end()};
}

}  // namespace swarm::op
