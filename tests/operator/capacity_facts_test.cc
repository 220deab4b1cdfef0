// Kubernetes objects -> capacity facts (operator/controller/capacity_facts.h), quantities, and the
// spec fields capacity reads (nodePools[].autoscaled, workers.resources).
#include "operator/controller/capacity_facts.h"

#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "operator/api/quantity.h"

namespace swarm::op {
namespace {

TEST(Quantity, DecimalBinaryAndExponentForms) {
  EXPECT_DOUBLE_EQ(parse_quantity("4"), 4);
  EXPECT_DOUBLE_EQ(parse_quantity("500m"), 0.5);
  EXPECT_DOUBLE_EQ(parse_quantity("1.5"), 1.5);
  EXPECT_DOUBLE_EQ(parse_quantity("16Gi"), 16.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_quantity("128974848"), 128974848);
  EXPECT_DOUBLE_EQ(parse_quantity("129M"), 129e6);
  EXPECT_DOUBLE_EQ(parse_quantity("123Mi"), 123.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_quantity("1e3"), 1000);
  EXPECT_DOUBLE_EQ(parse_quantity("2E"), 2e18);  // exa, not an exponent
  EXPECT_DOUBLE_EQ(parse_quantity("1k"), 1000);
  for (const char* bad : {"", "abc", "1x", "Gi", "1Gb", "1e", "1.2.3", ".", "1e1.5", "1e99999999999"}) {
    try {
      parse_quantity(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos) << e.what();
    }
  }
}

json pod(const std::string& node, const std::string& phase, json containers, json init = json::array()) {
  return {{"metadata", {{"name", "p"}, {"namespace", "other"}, {"uid", "u"}, {"resourceVersion", "5"}}},
          {"spec", {{"nodeName", node}, {"containers", containers}, {"initContainers", init}}},
          {"status", {{"phase", phase}}}};
}

TEST(CapacityFacts, PodRequestsSumContainersTakeTheLargestInitAndLimitsStandIn) {
  json containers = json::array({{{"name", "a"}, {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}}}},
                                 {{"name", "b"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}, {"cpu", "1"}}}}}}});
  json init = json::array({{{"name", "i"}, {"resources", {{"requests", {{"cpu", "3"}}}}}}});
  auto r = pod_requests(pod("n", "Running", containers, init));
  EXPECT_DOUBLE_EQ(r["cpu"], 3);  // init container 3 > 0.5 + 1
  EXPECT_DOUBLE_EQ(r["memory"], 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(r["nvidia.com/gpu"], 1);
}

TEST(CapacityFacts, OnlyBoundUnfinishedPodsHoldResourcesAndTheCachedViewKeepsTheirRequests) {
  json c = json::array({{{"name", "a"}, {"resources", {{"requests", {{"nvidia.com/gpu", "2"}}}}}}});
  EXPECT_FALSE(bound_pod(pod("", "Pending", c)));
  EXPECT_FALSE(bound_pod(pod("n", "Succeeded", c)));
  EXPECT_FALSE(bound_pod(pod("n", "Failed", c)));
  auto b = bound_pod(pod("n", "Running", c));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->node, "n");
  EXPECT_DOUBLE_EQ(b->requests["nvidia.com/gpu"], 2);
  const json view = capacity_view(pod("n", "Pending", c));
  EXPECT_EQ(view["metadata"]["resourceVersion"], "5");
  EXPECT_FALSE(view["spec"].contains("containers"));
  EXPECT_FALSE(view["metadata"].contains("labels"));  // someone else's
  json ours = pod("n", "Running", c);
  ours["metadata"]["labels"] = {{"app.kubernetes.io/managed-by", "swarm-operator"}, {"swarm-operator.io/job", "j"}};
  EXPECT_EQ(capacity_view(ours)["metadata"]["labels"], (json{{"app.kubernetes.io/managed-by", "swarm-operator"}}));
  auto again = bound_pod(view);
  ASSERT_TRUE(again);
  EXPECT_DOUBLE_EQ(again->requests["nvidia.com/gpu"], 2);
}

json node(json spec, json conditions, json md_extra = json::object()) {
  json md = {{"name", "n1"}, {"labels", {{"topology.kubernetes.io/region", "r1"}}}};
  md.update(md_extra);
  return {{"metadata", md}, {"spec", spec},
          {"status", {{"allocatable", {{"cpu", "8"}, {"nvidia.com/gpu", "2"}, {"pods", "110"}}}, {"conditions", conditions}}}};
}

TEST(CapacityFacts, NodeStateReadiness) {
  const json ready = json::array({{{"type", "Ready"}, {"status", "True"}}});
  auto n = node_facts(node(json::object(), ready));
  EXPECT_EQ(n.name, "n1");
  EXPECT_TRUE(planner::usable(n));
  EXPECT_DOUBLE_EQ(n.allocatable["nvidia.com/gpu"], 2);
  EXPECT_EQ(n.labels["topology.kubernetes.io/region"], "r1");
  EXPECT_FALSE(node_facts(node(json::object(), json::array({{{"type", "Ready"}, {"status", "Unknown"}}}))).ready);
  EXPECT_FALSE(node_facts(node(json::object(), json::array())).ready);  // no kubelet report yet
  auto cordoned = node_facts(node({{"unschedulable", true}}, ready));
  EXPECT_TRUE(cordoned.cordoned);
  EXPECT_FALSE(cordoned.under_notice);  // a cordon alone is no reclaim notice (not a GKE spot node)
  EXPECT_FALSE(planner::usable(cordoned));
  auto noticed = node_facts(node({{"taints", json::array({{{"key", "karpenter.sh/disrupted"}, {"effect", "NoSchedule"}}})}}, ready));
  EXPECT_TRUE(noticed.under_notice);
  ASSERT_EQ(noticed.taints.size(), 1u);
  EXPECT_EQ(noticed.taints[0].effect, "NoSchedule");
  auto deleting = node_facts(node(json::object(), ready, {{"deletionTimestamp", "2026-01-01T00:00:00Z"}}));
  EXPECT_TRUE(deleting.deleting);
}

TEST(CapacityFacts, PoolSelectorIsWhatTheWorkerPodAsksFor) {
  NodePool p;
  p.name = "spot-us";
  p.region = "us-central1";
  p.zone = "us-central1-a";
  p.node_selector = {{"cloud.google.com/gke-spot", "true"}};
  p.tolerations = json::array({{{"key", "cloud.google.com/gke-spot"}, {"value", "true"}, {"effect", "NoSchedule"}},
                               {{"key", "x"}, {"operator", "Exists"}}});
  p.max_workers = 4;
  auto s = pool_selector(&p);
  EXPECT_EQ(s.node_selector.size(), 3u);
  EXPECT_EQ(s.node_selector["topology.kubernetes.io/zone"], "us-central1-a");
  ASSERT_EQ(s.tolerations.size(), 2u);
  EXPECT_EQ(s.tolerations[0].op, "Equal");  // the API's default operator
  EXPECT_EQ(s.tolerations[1].op, "Exists");
  EXPECT_EQ(s.max_workers, 4);
  EXPECT_TRUE(pool_selector(nullptr).node_selector.empty());
}

json job(json spec) {
  return {{"apiVersion", kGroupVersion}, {"kind", "SwarmJob"}, {"metadata", {{"name", "j"}, {"namespace", "ns"}}}, {"spec", spec}};
}

TEST(CapacityFacts, SpecAutoscaledPoolsAndWorkerRequests) {
  json resources = {{"requests", {{"cpu", "4"}, {"memory", "16Gi"}}}, {"limits", {{"nvidia.com/gpu", 1}}}};
  json pools = json::array({{{"name", "a"}, {"autoscaled", true}}, {{"name", "b"}}});
  auto j = parse_swarmjob(job({{"workers", {{"resources", resources}}}, {"nodePools", pools}}));
  ASSERT_EQ(j.op.pools.size(), 2u);
  EXPECT_TRUE(j.op.pools[0].autoscaled);
  EXPECT_FALSE(j.op.pools[1].autoscaled);
  auto r = worker_request(j);
  EXPECT_DOUBLE_EQ(r["cpu"], 4);
  EXPECT_DOUBLE_EQ(r["nvidia.com/gpu"], 1);
  try {
    json bad_resources = {{"requests", {{"cpu", "four"}}}};
    json bad_pools = json::array({{{"name", "a"}, {"autoscaled", "yes"}}});
    parse_swarmjob(job({{"workers", {{"resources", bad_resources}}}, {"nodePools", bad_pools}}));
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("spec.workers.resources.requests[cpu]: must be a Kubernetes quantity (e.g. 500m, 2, 1.5, 16Gi, 1e3), got \"four\""), std::string::npos) << what;
    EXPECT_NE(what.find("spec.nodePools[0].autoscaled: must be a boolean, got \"yes\""), std::string::npos) << what;
  }
}

TEST(SpotWithoutCheckpoint, IsRefusedNamingTheField) {
  json pools = json::array({{{"name", "od"}}, {{"name", "spot"}, {"preemptible", true}}});
  try {
    parse_swarmjob(job({{"nodePools", pools}}));
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("spec.checkpoint.path: must name a durable checkpoint location"), std::string::npos) << what;
    EXPECT_NE(what.find("spec.nodePools[1] \"spot\""), std::string::npos) << what;
  }
  EXPECT_NO_THROW(parse_swarmjob(job({{"nodePools", pools}, {"checkpoint", {{"path", "/ckpt"}}}})));
  EXPECT_NO_THROW(parse_swarmjob(job({{"nodePools", json::array({{{"name", "od"}}})}})));  // nothing preemptible
}

}  // namespace
}  // namespace swarm::op
