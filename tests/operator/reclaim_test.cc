#include "operator/controller/reclaim.h"

#include <gtest/gtest.h>

namespace swarm::op {
namespace {

json node_with_taint(const std::string& key, const std::string& value = "", json labels = json::object()) {
  json taint = {{"key", key}, {"effect", "NoSchedule"}};
  if (!value.empty()) taint["value"] = value;
  return {{"metadata", {{"name", "n"}, {"labels", labels}}},
          {"spec", {{"taints", json::array({taint})}}},
          {"status", {{"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

TEST(Reclaim, HealthyNodeHasNoNotice) {
  EXPECT_FALSE(node_notice(node_with_taint("cloud.google.com/gke-spot", "true")));
  EXPECT_FALSE(node_notice(json{{"metadata", {{"name", "n"}}}}));  // no status yet: not a notice
}

TEST(Reclaim, CloudSignals) {
  auto gke = node_notice(node_with_taint("cloud.google.com/impending-node-termination"));
  ASSERT_TRUE(gke);
  EXPECT_EQ(gke->reason, "GKESpotTermination");
  EXPECT_EQ(gke->grace_seconds, 30);
  EXPECT_FALSE(gke->lost);
  auto karp = node_notice(node_with_taint("karpenter.sh/disrupted"));
  ASSERT_TRUE(karp);
  EXPECT_EQ(karp->reason, "KarpenterDisruption");
  EXPECT_EQ(karp->grace_seconds, 120);
  auto nth = node_notice(node_with_taint("aws-node-termination-handler/spot-itn"));
  ASSERT_TRUE(nth);
  EXPECT_EQ(nth->reason, "AWSSpotInterruption");
  EXPECT_EQ(nth->grace_seconds, 120);
  // AKS: only on spot nodes.
  EXPECT_FALSE(node_notice(node_with_taint("remediator.kubernetes.azure.com/unschedulable")));
  auto aks = node_notice(node_with_taint("remediator.kubernetes.azure.com/unschedulable", "",
                                         {{"kubernetes.azure.com/scalesetpriority", "spot"}}));
  ASSERT_TRUE(aks);
  EXPECT_EQ(aks->reason, "AKSSpotEviction");
}

TEST(Reclaim, GkeSpotNodeGoingAway) {
  json n = node_with_taint("x");
  n["metadata"]["labels"]["cloud.google.com/gke-spot"] = "true";
  EXPECT_FALSE(node_notice(n));
  n["spec"]["unschedulable"] = true;
  ASSERT_TRUE(node_notice(n));
  EXPECT_EQ(node_notice(n)->reason, "GKESpotShutdown");
}

TEST(Reclaim, DeadNodesAreLost) {
  json n = node_with_taint("x");
  n["status"]["conditions"][0]["status"] = "Unknown";
  auto notice = node_notice(n);
  ASSERT_TRUE(notice);
  EXPECT_TRUE(notice->lost);
  EXPECT_EQ(notice->grace_seconds, 0);
  EXPECT_TRUE(node_deleted_notice().lost);
  json deleting = node_with_taint("x");
  deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z";
  EXPECT_EQ(node_notice(deleting)->reason, "NodeDeleting");
}

TEST(Reclaim, PodSignals) {
  json pod = {{"metadata", {{"name", "p"}}}, {"status", {{"phase", "Running"}}}};
  EXPECT_FALSE(pod_notice(pod));
  pod["status"]["conditions"] = json::array({{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "TerminationByKubelet"}}});
  ASSERT_TRUE(pod_notice(pod));
  EXPECT_EQ(pod_notice(pod)->reason, "DisruptionTarget");
  pod["status"]["phase"] = "Failed";
  EXPECT_TRUE(pod_notice(pod)->lost);
}

}  // namespace
}  // namespace swarm::op
