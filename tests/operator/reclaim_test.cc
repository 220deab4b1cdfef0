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

// Issue 29: after an API server restart a healthy node went Unknown for a moment (its kubelet
// could not renew while the server was away) and the operator deleted its workers at once. Unknown
// within the grace after the API server answered again is the outage's doing; False (the kubelet
// says so) is not, nor is Unknown once the grace has passed or when the server never went away.
TEST(Reclaim, ANodeUnknownJustAfterTheApiServerCameBackIsNotTakenForLost) {
  json unknown = node_with_taint("x");
  unknown["status"]["conditions"][0]["status"] = "Unknown";
  json not_ready = node_with_taint("x");
  not_ready["status"]["conditions"][0]["status"] = "False";
  EXPECT_TRUE(unknown_after_api_outage(unknown, 0));
  EXPECT_TRUE(unknown_after_api_outage(unknown, kApiBackGraceSeconds - 0.1));
  EXPECT_FALSE(unknown_after_api_outage(unknown, kApiBackGraceSeconds));
  EXPECT_FALSE(unknown_after_api_outage(unknown, -1));  // the API server never went away
  EXPECT_FALSE(unknown_after_api_outage(not_ready, 1));
  EXPECT_FALSE(unknown_after_api_outage(node_with_taint("x"), 1));  // Ready: nothing to excuse
  EXPECT_FALSE(unknown_after_api_outage(json{{"metadata", {{"name", "n"}}}}, 1));
  EXPECT_GT(kApiBackGraceSeconds, 10);  // a kubelet renews its lease every 10 s
  EXPECT_LT(kApiBackGraceSeconds, 40);  // the node controller's grace before Unknown
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
