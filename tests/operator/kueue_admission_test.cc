// Admission -> placement (operator/kueue/admission.h), pure.
#include "operator/kueue/admission.h"

#include <gtest/gtest.h>

#include "operator/controller/manifests.h"

namespace swarm::op::kueue {
namespace {

const json kSpotTaintToleration = {{"key", "cloud.google.com/gke-spot"}, {"operator", "Equal"}, {"value", "true"},
                                   {"effect", "NoSchedule"}};

SwarmJob sample() {
  return parse_swarmjob(
      {{"apiVersion", op::kGroupVersion},
       {"kind", "SwarmJob"},
       {"metadata", {{"name", "lm"}, {"namespace", "ml"}, {"uid", "uid-1"}, {"labels", {{"kueue.x-k8s.io/queue-name", "q"}}}}},
       {"spec",
        {{"pipeline", {{"stages", 3}}},
         {"workers", {{"perStage", 2}, {"minPerStage", 1}, {"maxPerStage", 3}}},
         {"checkpoint", {{"path", "/ckpt"}}},
         {"nodePools", json::array({{{"name", "spot-us"}, {"region", "us"}, {"nodeSelector", {{"cloud.google.com/gke-spot", "true"}}},
                                     {"preemptible", true}, {"priority", 100}},
                                    {{"name", "spot-eu"}, {"region", "eu"}, {"nodeSelector", {{"cloud.google.com/gke-spot", "true"}}},
                                     {"preemptible", true}, {"priority", 50}},
                                    {{"name", "on-demand"}, {"nodeSelector", {{"node-class", "on-demand"}}}, {"priority", 10}}})}}}});
}

std::map<std::string, Flavor> flavors() {
  std::map<std::string, Flavor> f;
  f["spot-us"] = flavor_view({{"metadata", {{"name", "spot-us"}}},
                              {"spec", {{"nodeLabels", {{"cloud.google.com/gke-spot", "true"}, {"topology.kubernetes.io/region", "us"}}},
                                        {"tolerations", json::array({kSpotTaintToleration})}}}});
  f["on-demand"] = flavor_view({{"metadata", {{"name", "on-demand"}}}, {"spec", {{"nodeLabels", {{"node-class", "on-demand"}}}}}});
  f["gpu-a"] = flavor_view({{"metadata", {{"name", "gpu-a"}}}, {"spec", {{"nodeLabels", {{"gpu", "a"}}}}}});
  f["gpu-b"] = flavor_view({{"metadata", {{"name", "gpu-b"}}}, {"spec", {{"nodeLabels", {{"gpu", "b"}}}}}});
  return f;
}

WorkloadView admitted(const std::string& name, std::vector<PodSetAssignment> assignments) {
  WorkloadView w;
  w.name = name;
  w.has_admission = true;
  w.cluster_queue = "cq";
  w.conditions = {{"QuotaReserved", "True", "QuotaReserved", "", "", 1}, {"Admitted", "True", "Admitted", "", "", 1}};
  w.assignments = std::move(assignments);
  return w;
}

TEST(KueueAdmission, TheAdmittedCountsAreSpreadOverTheStagesWithTheFlavorsPlacement) {
  const SwarmJob job = sample();
  const auto groups = worker_groups(job, kueue_templates(job));
  const WorkloadView core = admitted("lm-core", {{"registry", 1, {{"cpu", "on-demand"}}},
                                                 {"trainers", 1, {{"cpu", "on-demand"}}},
                                                 {"workers", 3, {{"cpu", "spot-us"}}}});
  const WorkloadView ext = admitted("lm-ext", {{"workers", 4, {{"cpu", "spot-us"}}}});  // of 6 asked
  const Envelope e = envelope(job, groups, core, {ext}, flavors());
  EXPECT_TRUE(e.problems.empty());
  // 1 per stage from the core, the extension's 4 over 3 stages: 2, 1, 1.
  EXPECT_EQ(e.workers_per_stage, (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(e.trainers, 1);
  EXPECT_EQ(e.registries, 1);
  EXPECT_EQ(e.workers.node_selector.at("topology.kubernetes.io/region"), "us");
  EXPECT_EQ(e.workers.tolerations, json::array({kSpotTaintToleration}));
  EXPECT_EQ(e.trainers_overlay.node_selector.at("node-class"), "on-demand");
  EXPECT_EQ(e.cluster_queue, "cq");
  EXPECT_EQ(e.summary, "workers 7 on spot-us; trainers 1 on on-demand; registry on on-demand");
}

TEST(KueueAdmission, TheFlavorWinsAndPoolsNarrowItDown) {
  const SwarmJob job = sample();
  std::string problem;
  const auto spot = overlay_of({"workers", 3, {{"cpu", "spot-us"}, {"memory", "spot-us"}}}, flavors(), &problem);
  ASSERT_TRUE(spot) << problem;
  EXPECT_EQ(spot->flavors, std::vector<std::string>{"spot-us"});
  // spot-eu (region eu) and on-demand (no spot label... but no conflicting key either) against the
  // flavor's labels: eu conflicts on the region, on-demand has no key of the flavor's in conflict.
  const auto pools = pools_within(job.op.pools, *spot);
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(pools[0].name, "spot-us");
  EXPECT_EQ(pools[0].node_selector.at("topology.kubernetes.io/region"), "us");
  EXPECT_EQ(pools[0].tolerations, json::array({kSpotTaintToleration}));
  EXPECT_EQ(pools[0].priority, 100);
  EXPECT_EQ(pools[1].name, "on-demand");
  EXPECT_EQ(pools[1].node_selector.at("cloud.google.com/gke-spot"), "true");  // the flavor's, added

  // No pool fits the flavor: the workers go anywhere in it, in one pool named after it.
  const auto gpu = overlay_of({"workers", 1, {{"cpu", "gpu-a"}}}, flavors(), &problem);
  ASSERT_TRUE(gpu);
  std::vector<NodePool> b_only(1);
  b_only[0].name = "b";
  b_only[0].node_selector = {{"gpu", "b"}};
  const auto fallback = pools_within(b_only, *gpu);
  ASSERT_EQ(fallback.size(), 1u);
  EXPECT_EQ(fallback[0].name, "gpu-a");
  EXPECT_EQ(fallback[0].node_selector, (std::map<std::string, std::string>{{"gpu", "a"}}));
}

TEST(KueueAdmission, AnUnknownFlavorOrFlavorsInConflictPlaceNothing) {
  std::string problem;
  EXPECT_FALSE(overlay_of({"workers", 1, {{"cpu", "nope"}}}, flavors(), &problem));
  EXPECT_EQ(problem, "ResourceFlavor \"nope\" (assigned for cpu) is not known");
  EXPECT_FALSE(overlay_of({"workers", 1, {{"cpu", "gpu-a"}, {"nvidia.com/gpu", "gpu-b"}}}, flavors(), &problem));
  EXPECT_EQ(problem, "ResourceFlavors assigned together set node label gpu to \"a\" and \"b\"");

  const SwarmJob job = sample();
  const auto groups = worker_groups(job, kueue_templates(job));
  const WorkloadView core = admitted("lm-core", {{"registry", 1, {{"cpu", "on-demand"}}},
                                                 {"trainers", 1, {{"cpu", "on-demand"}}},
                                                 {"workers", 3, {{"cpu", "nope"}}}});
  const Envelope e = envelope(job, groups, core, {}, flavors());
  ASSERT_EQ(e.problems.size(), 1u);
  EXPECT_EQ(e.problems[0], "Workload lm-core podSet workers: ResourceFlavor \"nope\" (assigned for cpu) is not known");
}

TEST(KueueAdmission, AnExtensionOnAnotherFlavorIsRefusedNotRun) {
  const SwarmJob job = sample();
  const auto groups = worker_groups(job, kueue_templates(job));
  const WorkloadView core = admitted("lm-core", {{"registry", 1, {{"cpu", "on-demand"}}},
                                                 {"trainers", 1, {{"cpu", "on-demand"}}},
                                                 {"workers", 3, {{"cpu", "spot-us"}}}});
  const WorkloadView ext = admitted("lm-ext", {{"workers", 6, {{"cpu", "on-demand"}}}});
  const Envelope e = envelope(job, groups, core, {ext}, flavors());
  EXPECT_EQ(e.refused_extensions, std::vector<std::string>{"lm-ext"});
  EXPECT_EQ(e.workers_per_stage, (std::vector<int>{1, 1, 1}));
}

TEST(KueueAdmission, TheOverlayIsAddedToAPod) {
  json pod = {{"spec", {{"nodeSelector", {{"node-class", "x"}, {"keep", "1"}}},
                        {"tolerations", json::array({kSpotTaintToleration})}}}};
  Overlay o;
  o.node_selector = {{"node-class", "on-demand"}, {"zone", "a"}};
  o.tolerations = json::array({kSpotTaintToleration, {{"key", "dedicated"}, {"operator", "Exists"}}});
  apply_overlay(pod, o);
  EXPECT_EQ(pod["spec"]["nodeSelector"], (json{{"node-class", "on-demand"}, {"keep", "1"}, {"zone", "a"}}));
  EXPECT_EQ(pod["spec"]["tolerations"].size(), 2u);
  json bare = {{"spec", json::object()}};
  apply_overlay(bare, Overlay{});
  EXPECT_FALSE(bare["spec"].contains("nodeSelector"));
  EXPECT_FALSE(bare["spec"].contains("tolerations"));
}

}  // namespace
}  // namespace swarm::op::kueue
