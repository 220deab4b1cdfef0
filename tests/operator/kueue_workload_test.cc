// Kueue Workloads from a SwarmJob and back (operator/kueue/workload.h), pure.
#include "operator/kueue/workload.h"

#include <gtest/gtest.h>

#include "operator/controller/manifests.h"

namespace swarm::op::kueue {
namespace {

json job_object(const json& spec, const json& labels = {{"kueue.x-k8s.io/queue-name", "team-a"}}) {
  return {{"apiVersion", op::kGroupVersion},
          {"kind", "SwarmJob"},
          {"metadata", {{"name", "lm"}, {"namespace", "ml"}, {"uid", "uid-1"}, {"generation", 2}, {"labels", labels}}},
          {"spec", spec}};
}

const json kSpotToleration = {{"key", "spot"}, {"operator", "Exists"}};

SwarmJob sample(int min = 2, int max = 4) {
  return parse_swarmjob(job_object(
      {{"pipeline", {{"stages", 3}}},
       {"workers", {{"perStage", 2}, {"minPerStage", min}, {"maxPerStage", max},
                    {"resources", {{"requests", {{"cpu", "4"}, {"memory", "8Gi"}}}, {"limits", {{"nvidia.com/gpu", 1}}}}}}},
       {"trainers", {{"count", 2}, {"resources", {{"requests", {{"cpu", "2"}}}}}}},
       {"checkpoint", {{"path", "/ckpt"}}},
       {"nodePools", json::array({{{"name", "spot-us"}, {"region", "us"}, {"nodeSelector", {{"gpu", "a100"}}},
                                   {"tolerations", json::array({kSpotToleration})}, {"preemptible", true}},
                                  {{"name", "od"}, {"region", "us"}, {"nodeSelector", {{"gpu", "a100"}, {"class", "od"}}}}})}}));
}

const json* pod_set(const json& wl, const std::string& name) {
  for (const auto& ps : wl["spec"]["podSets"])
    if (ps["name"] == name) return &ps;
  return nullptr;
}

TEST(KueueWorkload, CoreAsksForRegistryTrainersAndMinPerStageWorkersWithThePodsRealRequests) {
  const SwarmJob job = sample();
  const json wl = core_workload(job, kueue_templates(job), Priority{"high", 1000});
  EXPECT_EQ(wl["apiVersion"], "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ(wl["metadata"]["name"], "lm-core");
  EXPECT_EQ(wl["metadata"]["namespace"], "ml");
  EXPECT_EQ(wl["metadata"]["labels"]["swarm-operator.io/workload"], "core");
  EXPECT_EQ(wl["metadata"]["labels"]["swarm-operator.io/job"], "lm");
  EXPECT_EQ(wl["metadata"]["finalizers"], json::array({"kueue.x-k8s.io/resource-in-use"}));
  const json owner = wl["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["uid"], "uid-1");
  EXPECT_EQ(owner["kind"], "SwarmJob");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(wl["spec"]["queueName"], "team-a");
  EXPECT_EQ(wl["spec"]["priorityClassRef"],
            (json{{"group", "kueue.x-k8s.io"}, {"kind", "WorkloadPriorityClass"}, {"name", "high"}}));
  EXPECT_EQ(wl["spec"]["priority"], 1000);
  ASSERT_EQ(wl["spec"]["podSets"].size(), 3u);  // registry, trainers, and one podSet for the 3 stages
  EXPECT_EQ((*pod_set(wl, "registry"))["count"], 1);
  EXPECT_EQ((*pod_set(wl, "trainers"))["count"], 2);
  const json& workers = *pod_set(wl, "workers");
  EXPECT_EQ(workers["count"], 6);  // minPerStage 2 x 3 stages
  EXPECT_FALSE(workers.contains("minCount"));
  const json c = workers["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "4");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_EQ((*pod_set(wl, "trainers"))["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"], "2");
  // Only what every pool sets alike narrows Kueue's flavors; any pool's toleration widens them.
  EXPECT_EQ(workers["template"]["spec"]["nodeSelector"],
            (json{{"gpu", "a100"}, {"topology.kubernetes.io/region", "us"}}));
  EXPECT_EQ(workers["template"]["spec"]["tolerations"], json::array({kSpotToleration}));
  // Nothing per pod (names, args, slots) in a template.
  EXPECT_FALSE(workers["template"]["spec"]["containers"][0].contains("args"));
  EXPECT_FALSE(workers["template"].contains("metadata"));
}

TEST(KueueWorkload, NoPriorityClassMeansNoRefAndNoPriority) {
  const SwarmJob job = sample();
  const json wl = core_workload(job, kueue_templates(job), std::nullopt);
  EXPECT_FALSE(wl["spec"].contains("priorityClassRef"));
  EXPECT_FALSE(wl["spec"].contains("priority"));
}

TEST(KueueWorkload, StagesWithDifferentTemplatesGetPodSetsOfTheirOwnAtMostSix) {
  const SwarmJob job = sample();
  JobTemplates t = kueue_templates(job);
  t.worker_by_stage[2]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "16";
  auto groups = worker_groups(job, t);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].pod_set, "workers-0");
  EXPECT_EQ(groups[0].stages, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1].pod_set, "workers-1");
  EXPECT_EQ(groups[1].stages, (std::vector<int>{2}));
  const json wl = core_workload(job, t, std::nullopt);
  EXPECT_EQ((*pod_set(wl, "workers-0"))["count"], 4);
  EXPECT_EQ((*pod_set(wl, "workers-1"))["count"], 2);

  for (int s = 0; s < 7; ++s) {
    t.worker_by_stage.resize(7, t.worker_by_stage[0]);
    t.worker_by_stage[s]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = std::to_string(s + 1);
  }
  try {
    worker_groups(job, t);
    ADD_FAILURE() << "7 worker templates accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("7 different pod templates; a Workload holds at most 8 podSets"),
              std::string::npos)
        << e.what();
  }
}

TEST(KueueWorkload, ExtensionAsksForTheWorkersBetweenMinAndMaxBelowTheCoreAndOnTheCoresFlavor) {
  const SwarmJob job = sample(/*min=*/1, /*max=*/3);
  const JobTemplates t = kueue_templates(job);
  const auto groups = worker_groups(job, t);
  const auto ext = extension_workload(job, groups, 0, Priority{"high", 1000}, {{"pool", "spot-a"}}, t.owner_reference);
  ASSERT_TRUE(ext);
  EXPECT_EQ((*ext)["metadata"]["name"], "lm-ext");
  EXPECT_EQ((*ext)["metadata"]["labels"]["swarm-operator.io/workload"], "extension");
  EXPECT_EQ((*ext)["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ((*ext)["metadata"]["finalizers"][0], "kueue.x-k8s.io/resource-in-use");
  EXPECT_EQ((*ext)["spec"]["priority"], 999);
  EXPECT_FALSE((*ext)["spec"].contains("priorityClassRef"));  // Kueue would reset it to the class's value
  EXPECT_EQ((*ext)["metadata"]["annotations"]["swarm-operator.io/priority-class"], "high");
  ASSERT_EQ((*ext)["spec"]["podSets"].size(), 1u);
  const json& ps = (*ext)["spec"]["podSets"][0];
  EXPECT_EQ(ps["name"], "workers");
  EXPECT_EQ(ps["count"], 6);  // (3 - 1) x 3 stages
  EXPECT_EQ(ps["minCount"], 1);
  EXPECT_EQ(ps["template"]["spec"]["nodeSelector"]["pool"], "spot-a");
  EXPECT_EQ(extension_priority(std::nullopt), -1);
  EXPECT_EQ(extension_priority(Priority{"min", std::numeric_limits<std::int32_t>::min()}),
            std::numeric_limits<std::int32_t>::min());
}

TEST(KueueWorkload, NoExtensionWhenMinPerStageIsMaxPerStage) {
  const SwarmJob job = sample(/*min=*/2, /*max=*/2);
  const JobTemplates t = kueue_templates(job);
  EXPECT_FALSE(extension_workload(job, worker_groups(job, t), 0, std::nullopt, {}, t.owner_reference));
}

TEST(KueueWorkload, TheQueueLabelMustNameALocalQueue) {
  const SwarmJob ok = parse_swarmjob(job_object({}, {{"kueue.x-k8s.io/queue-name", "team-a.gpu"}}));
  EXPECT_EQ(queue_name(ok), "team-a.gpu");
  EXPECT_FALSE(queue_name_problem(ok));
  const SwarmJob bad = parse_swarmjob(job_object({}, {{"kueue.x-k8s.io/queue-name", "Team_A"}}));
  ASSERT_TRUE(queue_name_problem(bad));
  EXPECT_EQ(*queue_name_problem(bad),
            "metadata.labels[kueue.x-k8s.io/queue-name]: must name a LocalQueue (a DNS-1123 subdomain: lowercase "
            "letters, digits, '-' and '.'), got \"Team_A\"");
  const SwarmJob none = parse_swarmjob(job_object({}, json::object()));
  EXPECT_EQ(queue_name(none), "");
  EXPECT_FALSE(queue_name_problem(none));
}

// A Workload as Kueue leaves it after an eviction by preemption.
json evicted_workload() {
  return {{"metadata", {{"name", "lm-core"}, {"namespace", "ml"}, {"uid", "w-1"}, {"resourceVersion", "42"},
                        {"generation", 3},
                        {"labels", {{"swarm-operator.io/workload", "core"}}},
                        {"finalizers", json::array({"other/keep", "kueue.x-k8s.io/resource-in-use"})},
                        {"ownerReferences", json::array({{{"uid", "uid-1"}, {"controller", true}}})}}},
          {"spec", {{"queueName", "team-a"}, {"priority", 10},
                    {"podSets", json::array({{{"name", "registry"}, {"count", 1}}, {{"name", "workers"}, {"count", 6}}})}}},
          {"status",
           {{"admission",
             {{"clusterQueue", "cq"},
              {"podSetAssignments", json::array({{{"name", "registry"}, {"flavors", {{"cpu", "od"}}}},
                                                 {{"name", "workers"}, {"count", 4}, {"flavors", {{"cpu", "spot"}, {"nvidia.com/gpu", "spot"}}}}})}}},
            {"conditions",
             json::array({{{"type", "QuotaReserved"}, {"status", "True"}, {"reason", "QuotaReserved"}, {"message", "Quota reserved in ClusterQueue cq"}, {"lastTransitionTime", "2026-12-03T10:00:00Z"}},
                          {{"type", "Admitted"}, {"status", "True"}, {"reason", "Admitted"}, {"message", "The workload is admitted"}, {"lastTransitionTime", "2026-12-03T10:00:00Z"}},
                          {{"type", "Evicted"}, {"status", "True"}, {"reason", "Preempted"}, {"message", "Preempted to accommodate a workload (UID: x) due to reclamation within the cohort"}, {"lastTransitionTime", "2026-12-03T10:05:00Z"}}})}}}};
}

TEST(KueueWorkload, AWorkloadIsReadBackWithItsAdmissionAndConditions) {
  const WorkloadView w = workload_view(evicted_workload());
  EXPECT_EQ(w.role, Role::Core);
  EXPECT_EQ(w.owner_uid, "uid-1");
  EXPECT_TRUE(w.has_finalizer());
  EXPECT_EQ(w.priority, 10);
  EXPECT_TRUE(w.quota_reserved());
  EXPECT_TRUE(w.admitted());
  EXPECT_TRUE(w.evicted());
  EXPECT_FALSE(w.finished());
  EXPECT_EQ(w.cluster_queue, "cq");
  EXPECT_EQ(w.admitted_count("registry"), 1);  // no count in the assignment: the podSet's own
  EXPECT_EQ(w.admitted_count("workers"), 4);   // partial admission
  EXPECT_EQ(w.admitted_count("trainers"), 0);
  EXPECT_EQ(w.assignments[1].flavors.at("nvidia.com/gpu"), "spot");
}

TEST(KueueWorkload, ClearingAnEvictedAdmissionFollowsKueuesProtocol) {
  const WorkloadView w = workload_view(evicted_workload());
  const json patch = clear_admission_patch(w, "2026-12-03T10:06:00Z");
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "42");
  EXPECT_TRUE(patch["status"]["admission"].is_null());
  std::map<std::string, json> by_type;
  for (const auto& c : patch["status"]["conditions"]) by_type[c["type"]] = c;
  EXPECT_EQ(by_type["QuotaReserved"]["status"], "False");
  EXPECT_EQ(by_type["QuotaReserved"]["reason"], "Pending");
  EXPECT_EQ(by_type["QuotaReserved"]["lastTransitionTime"], "2026-12-03T10:06:00Z");
  EXPECT_EQ(by_type["QuotaReserved"]["observedGeneration"], 3);
  EXPECT_EQ(by_type["Admitted"]["status"], "False");
  EXPECT_EQ(by_type["Admitted"]["reason"], "NoReservation");
  EXPECT_EQ(by_type["Requeued"]["status"], "True");  // preempted: Kueue queues it again
  EXPECT_EQ(by_type["Requeued"]["reason"], "Preempted");
  EXPECT_EQ(by_type["Evicted"]["status"], "True");  // Kueue's own, kept (it resets it on the next admission)

  json deactivated = evicted_workload();
  deactivated["status"]["conditions"][2]["reason"] = "Deactivated";
  const json p2 = clear_admission_patch(workload_view(deactivated), "2026-12-03T10:06:00Z");
  for (const auto& c : p2["status"]["conditions"])
    if (c["type"] == "Requeued") EXPECT_EQ(c["status"], "False");
}

TEST(KueueWorkload, FinishedAndReleasePatches) {
  const WorkloadView w = workload_view(evicted_workload());
  const json fin = finished_patch(w, true, "the training finished", "2026-12-03T11:00:00Z");
  bool found = false;
  for (const auto& c : fin["status"]["conditions"])
    if (c["type"] == "Finished") {
      found = true;
      EXPECT_EQ(c["status"], "True");
      EXPECT_EQ(c["reason"], "Succeeded");
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(finished_patch(w, false, "x", "t")["status"]["conditions"].back()["reason"], "Failed");
  const json rel = release_patch(w);
  EXPECT_EQ(rel["metadata"]["finalizers"], json::array({"other/keep"}));  // only ours goes
  EXPECT_EQ(rel["metadata"]["resourceVersion"], "42");
}

}  // namespace
}  // namespace swarm::op::kueue
