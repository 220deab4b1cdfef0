#include "planner/capacity.h"

#include <algorithm>
#include <cmath>

namespace swarm::planner {

bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint) {
  for (const auto& t : tolerations) {
    if (!t.effect.empty() && t.effect != taint.effect) continue;
    if (t.op == "Exists") {
      if (t.key.empty() || t.key == taint.key) return true;
    } else if (t.key == taint.key && t.value == taint.value) {
      return true;
    }
  }
  return false;
}

bool selects(const PoolSelector& pool, const NodeFacts& node) {
  for (const auto& [k, v] : pool.node_selector) {
    auto it = node.labels.find(k);
    if (it == node.labels.end() || it->second != v) return false;
  }
  return true;
}

bool admits(const PoolSelector& pool, const NodeFacts& node) {
  if (!selects(pool, node)) return false;
  for (const auto& taint : node.taints) {
    if (taint.effect == "PreferNoSchedule") continue;  // a preference, never a refusal
    if (!tolerates(pool.tolerations, taint)) return false;
  }
  return true;
}

bool usable(const NodeFacts& node) { return node.ready && !node.cordoned && !node.deleting && !node.under_notice; }

int slots_in(const Resources& free, const Resources& request) {
  Resources want = request;
  want["pods"] += 1;
  double slots = kMaxSlotsPerNode;
  for (const auto& [name, amount] : want) {
    if (amount <= 0) continue;
    auto it = free.find(name);
    if (it == free.end() && name == "pods") continue;  // a node that states no pod limit has none
    const double have = it == free.end() ? 0 : it->second;
    // A small tolerance: 0.1 + 0.2 cores must still fit into 0.3.
    slots = std::min(slots, std::floor(have / amount + 1e-9));
  }
  return std::max(0, static_cast<int>(slots));
}

ClusterCapacity cluster_capacity(const std::vector<NodeFacts>& nodes, const std::vector<BoundPod>& pods,
                                 const std::vector<PoolSelector>& pools, const Resources& worker_request) {
  std::map<std::string, Resources> used;
  for (const auto& p : pods) {
    auto& u = used[p.node];
    for (const auto& [name, amount] : p.requests) u[name] += amount;
    u["pods"] += 1;
  }
  ClusterCapacity out;
  for (const auto& pool : pools) out.pools.push_back({pool.name, 0, 0, 0, 0, 0, pool.max_workers});
  std::vector<const NodeFacts*> sorted;
  for (const auto& n : nodes) sorted.push_back(&n);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const NodeFacts* node : sorted) {
    Resources free = node->allocatable;
    auto u = used.find(node->name);
    if (u != used.end())
      for (const auto& [name, amount] : u->second)
        if (name != "pods" || node->allocatable.count("pods")) free[name] -= amount;
    const int free_slots = slots_in(free, worker_request);
    const int empty_slots = slots_in(node->allocatable, worker_request);
    NodeSlots slots{node->name, free_slots, {}};
    for (size_t i = 0; i < pools.size(); ++i) {
      PoolCapacity& pc = out.pools[i];
      // A node under notice counts as the pool's even when the notice is a taint it does not
      // tolerate (karpenter.sh/disrupted...): that is capacity the pool is losing.
      if (node->under_notice && selects(pools[i], *node)) {
        ++pc.nodes;
        ++pc.under_notice;
        continue;
      }
      if (!admits(pools[i], *node)) continue;
      ++pc.nodes;
      if (!usable(*node)) {
        ++pc.unusable;
        continue;
      }
      pc.free_slots += free_slots;
      pc.used_slots += std::max(0, empty_slots - free_slots);
      slots.pools.push_back(pools[i].name);
    }
    if (!slots.pools.empty()) out.nodes.push_back(std::move(slots));
  }
  return out;
}

}  // namespace swarm::planner
