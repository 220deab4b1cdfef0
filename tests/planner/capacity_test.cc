// Pool capacity from nodes and bound pods (planner/capacity.h).
#include "planner/capacity.h"

#include <gtest/gtest.h>

namespace swarm::planner {
namespace {

NodeFacts node(const std::string& name, const std::string& region, double gpus = 2, bool spot = true) {
  NodeFacts n;
  n.name = name;
  n.labels = {{"topology.kubernetes.io/region", region}};
  if (spot) {
    n.labels["cloud.google.com/gke-spot"] = "true";
    n.taints.push_back({"cloud.google.com/gke-spot", "true", "NoSchedule"});
  }
  n.allocatable = {{"cpu", 16}, {"memory", 64.0 * (1 << 30)}, {"pods", 110}, {"nvidia.com/gpu", gpus}};
  return n;
}

PoolSelector spot_pool(const std::string& name, const std::string& region, int max = -1) {
  return {name,
          {{"cloud.google.com/gke-spot", "true"}, {"topology.kubernetes.io/region", region}},
          {{"cloud.google.com/gke-spot", "Equal", "true", "NoSchedule"}},
          max};
}

const Resources kWorker = {{"cpu", 4}, {"memory", 16.0 * (1 << 30)}, {"nvidia.com/gpu", 1}};

TEST(Capacity, TolerationsMatchByKeyValueAndEffect) {
  const Taint spot{"cloud.google.com/gke-spot", "true", "NoSchedule"};
  EXPECT_TRUE(tolerates({{"cloud.google.com/gke-spot", "Equal", "true", "NoSchedule"}}, spot));
  EXPECT_TRUE(tolerates({{"cloud.google.com/gke-spot", "Exists", "", ""}}, spot));
  EXPECT_TRUE(tolerates({{"", "Exists", "", ""}}, spot));  // tolerates everything
  EXPECT_FALSE(tolerates({{"cloud.google.com/gke-spot", "Equal", "false", "NoSchedule"}}, spot));
  EXPECT_FALSE(tolerates({{"cloud.google.com/gke-spot", "Equal", "true", "NoExecute"}}, spot));
  EXPECT_FALSE(tolerates({}, spot));
}

TEST(Capacity, SelectorAndTaintsDecideWhichPoolsAdmitANode) {
  const NodeFacts us = node("us-0", "us-central1");
  EXPECT_TRUE(admits(spot_pool("spot-us", "us-central1"), us));
  EXPECT_FALSE(admits(spot_pool("spot-eu", "europe-west4"), us));
  // No toleration for the spot taint: refused even though the labels match.
  EXPECT_FALSE(admits({"plain", {{"topology.kubernetes.io/region", "us-central1"}}, {}, -1}, us));
  // PreferNoSchedule only prefers.
  NodeFacts od = node("od-0", "us-central1", 2, false);
  od.taints.push_back({"dedicated", "x", "PreferNoSchedule"});
  EXPECT_TRUE(admits({"any", {}, {}, -1}, od));
}

TEST(Capacity, SlotsAreTheScarcestResourceAndOnePodEach) {
  EXPECT_EQ(slots_in({{"cpu", 16}, {"nvidia.com/gpu", 2}, {"pods", 110}}, {{"cpu", 4}, {"nvidia.com/gpu", 1}}), 2);
  EXPECT_EQ(slots_in({{"cpu", 6}, {"nvidia.com/gpu", 8}, {"pods", 110}}, {{"cpu", 4}, {"nvidia.com/gpu", 1}}), 1);
  EXPECT_EQ(slots_in({{"cpu", 16}, {"pods", 3}}, {}), 3);                          // no requests: the pod limit
  EXPECT_EQ(slots_in({{"cpu", 16}, {"pods", 110}}, {{"nvidia.com/gpu", 1}}), 0);  // no GPU on the node
  EXPECT_EQ(slots_in({{"cpu", 0.3}, {"pods", 10}}, {{"cpu", 0.1}}), 3);           // rounding tolerance
  EXPECT_EQ(slots_in({{"cpu", -1}, {"pods", 10}}, {{"cpu", 1}}), 0);              // overcommitted
  EXPECT_EQ(slots_in({{"cpu", 8}}, {{"cpu", 2}}), 4);                              // no pod limit stated
}

TEST(Capacity, EveryBoundPodCountsNotOnlyOurs) {
  std::vector<NodeFacts> nodes = {node("us-0", "us-central1"), node("us-1", "us-central1")};
  // us-0: one of our workers and someone else's GPU pod; us-1: a CPU-only pod of someone else.
  std::vector<BoundPod> pods = {{"us-0", kWorker}, {"us-0", {{"nvidia.com/gpu", 1}}}, {"us-1", {{"cpu", 10}}}};
  auto cap = cluster_capacity(nodes, pods, {spot_pool("spot-us", "us-central1")}, kWorker);
  ASSERT_EQ(cap.pools.size(), 1u);
  EXPECT_EQ(cap.pools[0].nodes, 2);
  EXPECT_EQ(cap.pools[0].free_slots, 1);  // us-0 full (2 GPUs taken), us-1: 6 cpu left = 1 worker
  EXPECT_EQ(cap.pools[0].used_slots, 3);  // of 4 slots when empty
  ASSERT_EQ(cap.nodes.size(), 2u);
  EXPECT_EQ(cap.nodes[0].name, "us-0");
  EXPECT_EQ(cap.nodes[0].free, 0);
  EXPECT_EQ(cap.nodes[1].free, 1);
  EXPECT_EQ(cap.nodes[1].pools, std::vector<std::string>{"spot-us"});
}

TEST(Capacity, NodesUnderNoticeNotReadyCordonedOrDeletingAreNotCapacity) {
  std::vector<NodeFacts> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(node("us-" + std::to_string(i), "us-central1"));
  nodes[0].under_notice = true;
  nodes[0].taints.push_back({"karpenter.sh/disrupted", "", "NoSchedule"});  // the notice, not tolerated
  nodes[1].ready = false;
  nodes[2].cordoned = true;
  nodes[3].deleting = true;
  auto cap = cluster_capacity(nodes, {}, {spot_pool("spot-us", "us-central1")}, kWorker);
  EXPECT_EQ(cap.pools[0].nodes, 5);
  EXPECT_EQ(cap.pools[0].under_notice, 1);
  EXPECT_EQ(cap.pools[0].unusable, 3);
  EXPECT_EQ(cap.pools[0].free_slots, 2);  // us-4 alone
  ASSERT_EQ(cap.nodes.size(), 1u);
  EXPECT_EQ(cap.nodes[0].name, "us-4");
}

TEST(Capacity, ThreePoolsOfTheMultiRegionExample) {
  std::vector<NodeFacts> nodes = {node("us-0", "us-central1"), node("us-1", "us-central1"),
                                  node("eu-0", "europe-west4"), node("od-0", "us-central1", 2, false)};
  nodes[0].labels["swarm-operator.io/node-class"] = "spot";
  nodes[3].labels["swarm-operator.io/node-class"] = "on-demand";
  const PoolSelector od{"on-demand", {{"swarm-operator.io/node-class", "on-demand"}}, {}, -1};
  nodes[1].under_notice = true;
  std::vector<BoundPod> pods = {{"us-0", kWorker}, {"eu-0", kWorker}, {"eu-0", kWorker}};
  auto cap = cluster_capacity(nodes, pods,
                              {spot_pool("spot-us", "us-central1", 4), spot_pool("spot-eu", "europe-west4"), od}, kWorker);
  ASSERT_EQ(cap.pools.size(), 3u);
  EXPECT_EQ(cap.pools[0].free_slots, 1);
  EXPECT_EQ(cap.pools[0].under_notice, 1);
  EXPECT_EQ(cap.pools[0].max_workers, 4);
  EXPECT_EQ(cap.pools[1].free_slots, 0);
  EXPECT_EQ(cap.pools[1].used_slots, 2);
  EXPECT_EQ(cap.pools[2].free_slots, 2);
  // The on-demand node is not a spot pool's: its spot selector does not match.
  for (const auto& n : cap.nodes) {
    if (n.name == "od-0") {
      EXPECT_EQ(n.pools, std::vector<std::string>{"on-demand"});
    }
  }
}

TEST(Capacity, OverlappingPoolsShareANode) {
  std::vector<NodeFacts> nodes = {node("n", "r1", 2, false)};
  auto cap = cluster_capacity(nodes, {}, {{"a", {}, {}, -1}, {"b", {{"topology.kubernetes.io/region", "r1"}}, {}, -1}},
                              {{"nvidia.com/gpu", 1}});
  ASSERT_EQ(cap.nodes.size(), 1u);
  EXPECT_EQ(cap.nodes[0].pools, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cap.pools[0].free_slots, 2);
  EXPECT_EQ(cap.pools[1].free_slots, 2);  // the same two slots: the placement planner counts them once
}

}  // namespace
}  // namespace swarm::planner
