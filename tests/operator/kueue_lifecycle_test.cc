// A Kueue-managed job's life (operator/kueue/lifecycle.h), pure: one decision per reconcile.
#include "operator/kueue/lifecycle.h"

#include <gtest/gtest.h>

#include "operator/controller/manifests.h"

namespace swarm::op::kueue {
namespace {

using Kind = WorkloadWrite::Kind;

SwarmJob sample(bool suspend, int min, int per, int max) {
  return parse_swarmjob(
      {{"apiVersion", op::kGroupVersion},
       {"kind", "SwarmJob"},
       {"metadata", {{"name", "lm"}, {"namespace", "ml"}, {"uid", "uid-1"}, {"generation", 4},
                     {"labels", {{"kueue.x-k8s.io/queue-name", "team-a"}}}}},
       {"spec", {{"suspend", suspend}, {"pipeline", {{"stages", 2}}}, {"checkpoint", {{"path", "/ckpt"}}},
                 {"workers", {{"perStage", per}, {"minPerStage", min}, {"maxPerStage", max}}}}}});
}

Condition cond(const std::string& type, const std::string& status, const std::string& reason = "",
               const std::string& message = "", const std::string& time = "2026-12-03T10:00:00Z") {
  return {type, status, reason, message, time, 1};
}

WorkloadView workload(const std::string& name, Role role, const std::string& owner = "uid-1") {
  WorkloadView w;
  w.name = name;
  w.role = role;
  w.owner_uid = owner;
  w.resource_version = "5";
  w.finalizers = {kResourceInUseFinalizer};
  return w;
}

WorkloadView admitted_core() {
  WorkloadView w = workload("lm-core", Role::Core);
  w.has_admission = true;
  w.cluster_queue = "cq";
  w.conditions = {cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "True", "Admitted")};
  w.assignments = {{"registry", 1, {{"cpu", "od"}}}, {"trainers", 1, {{"cpu", "od"}}}, {"workers", 2, {{"cpu", "od"}}}};
  return w;
}

WorkloadView evicted(WorkloadView w, const std::string& reason = "Preempted",
                     const std::string& time = "2026-12-03T10:05:00Z") {
  w.conditions.push_back(cond("Evicted", "True", reason, "Preempted to accommodate a workload", time));
  return w;
}

struct Fixture {
  SwarmJob job;
  JobTemplates templates;
  Fixture(bool suspend = false, int min = 1, int per = 2, int max = 3)
      : job(sample(suspend, min, per, max)), templates(kueue_templates(job)) {}
  Inputs inputs(std::vector<WorkloadView> workloads, PodCounts pods = {}) const {
    Inputs in{job, templates};
    in.workloads = std::move(workloads);
    in.pods = pods;
    in.flavors["od"] = flavor_view({{"metadata", {{"name", "od"}}}, {"spec", {{"nodeLabels", {{"node-class", "od"}}}}}});
    in.now = "2026-12-03T10:06:00Z";
    return in;
  }
};

std::vector<Kind> kinds(const Decision& d) {
  std::vector<Kind> out;
  for (const auto& w : d.writes) out.push_back(w.kind);
  return out;
}

PodCounts pods(int trainers, int trainers_term, int workers, int workers_term, int registries, int registries_term) {
  PodCounts p;
  p.trainers_alive = trainers;
  p.trainers_terminating = trainers_term;
  p.workers_alive = workers;
  p.workers_terminating = workers_term;
  p.registries_alive = registries;
  p.registries_terminating = registries_term;
  p.workers_by_stage = {workers + workers_term};
  return p;
}

TEST(KueueLifecycle, AJobWithoutAWorkloadGetsItsCoreAndWaitsSuspended) {
  Fixture f;
  Inputs in = f.inputs({});
  in.priority = Priority{"low", 10};
  const Decision d = decide(in);
  ASSERT_EQ(kinds(d), std::vector<Kind>{Kind::Create});
  EXPECT_EQ(d.writes[0].name, "lm-core");
  EXPECT_EQ(d.writes[0].body["spec"]["priority"], 10);
  EXPECT_EQ(d.suspend, true);
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.drain, DrainStep::Done);
  EXPECT_EQ(d.phase, "Queued");
  EXPECT_EQ(d.queued.status, "True");
  EXPECT_EQ(d.queued.message, "waiting for LocalQueue team-a to admit Workload lm-core");
  EXPECT_EQ(d.queue.name, "team-a");
}

TEST(KueueLifecycle, AMissingPriorityClassMakesNoWorkloadAndSaysWhy) {
  Fixture f;
  Inputs in = f.inputs({});
  in.priority_problem = "WorkloadPriorityClass \"hgih\" (label kueue.x-k8s.io/priority-class) not found";
  const Decision d = decide(in);
  EXPECT_TRUE(d.writes.empty());
  EXPECT_EQ(d.queued.reason, "PriorityClassNotFound");
  EXPECT_EQ(d.queued.message, in.priority_problem);
  EXPECT_EQ(d.phase, "Queued");
}

TEST(KueueLifecycle, AWaitingJobQuotesKueuesReasonAndRunsNothing) {
  Fixture f(/*suspend=*/true);
  WorkloadView core = workload("lm-core", Role::Core);
  core.conditions = {cond("QuotaReserved", "False", "Pending",
                          "couldn't assign flavors to pod set workers: insufficient quota for cpu in flavor od")};
  const Decision d = decide(f.inputs({core}));
  EXPECT_TRUE(d.writes.empty());
  EXPECT_FALSE(d.suspend);  // already suspended: nothing to write
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.phase, "Queued");
  EXPECT_EQ(d.queued.reason, "Pending");
  EXPECT_EQ(d.queued.message,
            "waiting for LocalQueue team-a to admit Workload lm-core: couldn't assign flavors to pod set workers: "
            "insufficient quota for cpu in flavor od");
}

TEST(KueueLifecycle, AnAdmittedJobRunsTheEnvelopeUnsuspendedAndAsksForItsExtension) {
  Fixture f(/*suspend=*/true);
  Inputs in = f.inputs({admitted_core()});
  in.priority = Priority{"low", 10};
  const Decision d = decide(in);
  EXPECT_EQ(d.suspend, false);
  ASSERT_TRUE(d.run);
  ASSERT_TRUE(d.envelope);
  EXPECT_EQ(d.envelope->workers_per_stage, (std::vector<int>{1, 1}));
  EXPECT_EQ(d.envelope->workers.node_selector.at("node-class"), "od");
  EXPECT_EQ(d.phase, "");  // as the pods say: Pending, then Running
  EXPECT_EQ(d.queued.status, "False");
  EXPECT_EQ(d.queued.reason, "Admitted");
  // The core's priority is written (none was resolved into it), and the extension is asked for,
  // below it, on the core workers' flavor.
  ASSERT_EQ(kinds(d), (std::vector<Kind>{Kind::PatchSpec, Kind::Create}));
  EXPECT_EQ(d.writes[0].body, (json{{"spec", {{"priority", 10}}}}));
  EXPECT_EQ(d.writes[1].name, "lm-ext");
  EXPECT_EQ(d.writes[1].body["spec"]["priority"], 9);
  EXPECT_EQ(d.writes[1].body["spec"]["podSets"][0]["count"], 4);
  EXPECT_EQ(d.writes[1].body["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"]["node-class"], "od");
  EXPECT_EQ(d.queue.cluster_queue, "cq");
  EXPECT_EQ(d.queue.admitted_workers, 2);
}

TEST(KueueLifecycle, AnAdmittedExtensionAddsItsWorkers) {
  Fixture f;
  WorkloadView ext = workload("lm-ext", Role::Extension);
  ext.priority = -1;
  ext.has_admission = true;
  ext.conditions = {cond("QuotaReserved", "True"), cond("Admitted", "True")};
  ext.assignments = {{"workers", 3, {{"cpu", "od"}}}};
  const Decision d = decide(f.inputs({admitted_core(), ext}));
  ASSERT_TRUE(d.run);
  EXPECT_EQ(d.envelope->workers_per_stage, (std::vector<int>{3, 2}));
  EXPECT_TRUE(d.writes.empty());
  EXPECT_EQ(d.queue.workloads, (std::vector<std::string>{"lm-core", "lm-ext"}));
}

TEST(KueueLifecycle, AnEvictedJobDrainsInOrderAndGivesTheQuotaBackOnlyWhenNoPodIsLeft) {
  Fixture f;
  const WorkloadView core = evicted(admitted_core());
  struct Step {
    PodCounts pods;
    DrainStep expect;
  };
  const std::vector<Step> steps = {
      {pods(1, 0, 2, 0, 1, 0), DrainStep::StopTrainers},  // trainers first: every stage stops at one step
      {pods(0, 1, 2, 0, 1, 0), DrainStep::WaitTrainers},
      {pods(0, 0, 2, 0, 1, 0), DrainStep::DrainWorkers},  // SIGTERM: hand-off, last peer checkpoints
      {pods(0, 0, 0, 2, 1, 0), DrainStep::WaitWorkers},
      {pods(0, 0, 0, 0, 1, 0), DrainStep::StopRegistry},
      {pods(0, 0, 0, 0, 0, 1), DrainStep::WaitRegistry},
  };
  for (const auto& s : steps) {
    const Decision d = decide(f.inputs({core}, s.pods));
    EXPECT_EQ(d.drain, s.expect);
    EXPECT_FALSE(d.run);
    EXPECT_EQ(d.phase, "Draining");
    EXPECT_EQ(d.suspend, true);
    EXPECT_TRUE(d.writes.empty()) << "quota given back with pods left (step " << static_cast<int>(s.expect) << ")";
  }
  const Decision done = decide(f.inputs({core}, pods(0, 0, 0, 0, 0, 0)));
  ASSERT_EQ(kinds(done), std::vector<Kind>{Kind::PatchStatus});
  EXPECT_EQ(done.writes[0].name, "lm-core");
  EXPECT_TRUE(done.writes[0].body["status"]["admission"].is_null());
  EXPECT_EQ(done.queued.reason, "Evicted");
  EXPECT_NE(done.queued.message.find("quota given back"), std::string::npos) << done.queued.message;
}

TEST(KueueLifecycle, AnEvictionIsCountedOnceAcrossPassesAndRestarts) {
  Fixture f;
  const WorkloadView core = evicted(admitted_core());
  Inputs in = f.inputs({core}, pods(0, 0, 2, 0, 1, 0));
  const Decision first = decide(in);
  EXPECT_EQ(first.queue.evictions, 1);
  EXPECT_EQ(first.queue.last_eviction_reason, "Preempted");
  ASSERT_EQ(first.events.size(), 1u);
  EXPECT_EQ(first.events[0].reason, "Evicted");
  in.previous = first.queue;  // what the status now says, also after an operator restart
  const Decision again = decide(in);
  EXPECT_EQ(again.queue.evictions, 1);
  EXPECT_TRUE(again.events.empty());
  // A later eviction (re-admitted meanwhile) counts again.
  Inputs later = f.inputs({evicted(admitted_core(), "Preempted", "2026-12-03T11:00:00Z")}, pods(0, 0, 2, 0, 1, 0));
  later.previous = first.queue;
  EXPECT_EQ(decide(later).queue.evictions, 2);
}

TEST(KueueLifecycle, AnOperatorRestartedAfterThePodsWentClearsTheAdmissionAndAgainIsHarmless) {
  Fixture f;
  const WorkloadView core = evicted(admitted_core());
  const Decision d1 = decide(f.inputs({core}));
  const Decision d2 = decide(f.inputs({core}));  // the cache has not seen the first patch yet
  ASSERT_EQ(kinds(d1), std::vector<Kind>{Kind::PatchStatus});
  EXPECT_EQ(d1.writes[0].body, d2.writes[0].body);  // same resourceVersion: the second one is a 409, no harm
  EXPECT_EQ(d1.writes[0].body["metadata"]["resourceVersion"], "5");
}

TEST(KueueLifecycle, AnEvictedExtensionGivesItsQuotaBackOnceTheWorkersBeyondTheCoresAreGone) {
  Fixture f;
  WorkloadView ext = evicted(workload("lm-ext", Role::Extension));
  ext.priority = -1;
  ext.has_admission = true;
  ext.conditions.insert(ext.conditions.begin(), {cond("QuotaReserved", "True"), cond("Admitted", "True")});
  ext.assignments = {{"workers", 2, {{"cpu", "od"}}}};
  // 4 workers (2 of them the extension's): they must go first; the core's 2 stay.
  const Decision busy = decide(f.inputs({admitted_core(), ext}, pods(1, 0, 4, 0, 1, 0)));
  ASSERT_TRUE(busy.run);
  EXPECT_EQ(busy.envelope->workers_per_stage, (std::vector<int>{1, 1}));
  EXPECT_TRUE(busy.writes.empty());
  const Decision still = decide(f.inputs({admitted_core(), ext}, pods(1, 0, 2, 1, 1, 0)));
  EXPECT_TRUE(still.writes.empty()) << "a terminating worker still holds the extension's quota";
  const Decision gone = decide(f.inputs({admitted_core(), ext}, pods(1, 0, 2, 0, 1, 0)));
  ASSERT_EQ(kinds(gone), std::vector<Kind>{Kind::PatchStatus});
  EXPECT_EQ(gone.writes[0].name, "lm-ext");
}

TEST(KueueLifecycle, AnExtensionOnAnotherFlavorIsDeactivated) {
  Fixture f;
  WorkloadView ext = workload("lm-ext", Role::Extension);
  ext.priority = -1;
  ext.has_admission = true;
  ext.conditions = {cond("QuotaReserved", "True"), cond("Admitted", "True")};
  ext.assignments = {{"workers", 2, {{"cpu", "spot"}}}};
  Inputs in = f.inputs({admitted_core(), ext});
  in.flavors["spot"] = flavor_view({{"metadata", {{"name", "spot"}}}, {"spec", {{"nodeLabels", {{"node-class", "spot"}}}}}});
  const Decision d = decide(in);
  ASSERT_EQ(kinds(d), std::vector<Kind>{Kind::PatchSpec});
  EXPECT_EQ(d.writes[0].body, (json{{"spec", {{"active", false}}}}));
  EXPECT_EQ(d.envelope->workers_per_stage, (std::vector<int>{1, 1}));
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].reason, "ExtensionRefused");
}

TEST(KueueLifecycle, AWaitingCoreTakesItsExtensionsAwayOnceNoPodIsLeft) {
  Fixture f;
  WorkloadView core = workload("lm-core", Role::Core);
  core.conditions = {cond("QuotaReserved", "False", "Pending"), cond("Requeued", "True", "Preempted")};
  WorkloadView ext = workload("lm-ext", Role::Extension);
  const Decision d = decide(f.inputs({core, ext}));
  EXPECT_EQ(kinds(d), (std::vector<Kind>{Kind::Release, Kind::Delete}));
  EXPECT_EQ(d.writes[0].name, "lm-ext");
}

TEST(KueueLifecycle, AnEndedJobDrainsThenFinishesThenReleasesItsWorkloads) {
  Fixture f;
  Inputs running = f.inputs({admitted_core()}, pods(0, 0, 2, 0, 1, 0));
  running.ended = running.succeeded = true;
  const Decision d1 = decide(running);
  EXPECT_EQ(d1.drain, DrainStep::DrainWorkers);
  EXPECT_TRUE(d1.writes.empty());
  EXPECT_EQ(d1.phase, "Finished");
  Inputs drained = f.inputs({admitted_core()});
  drained.ended = drained.succeeded = true;
  const Decision d2 = decide(drained);
  ASSERT_EQ(kinds(d2), std::vector<Kind>{Kind::PatchStatus});
  EXPECT_EQ(d2.writes[0].body["status"]["conditions"].back()["type"], "Finished");
  WorkloadView finished = admitted_core();
  finished.conditions.push_back(cond("Finished", "True", "Succeeded"));
  Inputs after = f.inputs({finished});
  after.ended = after.succeeded = true;
  const Decision d3 = decide(after);
  ASSERT_EQ(kinds(d3), std::vector<Kind>{Kind::Release});
  EXPECT_EQ(d3.writes[0].body["metadata"]["finalizers"], json::array());
  finished.finalizers.clear();
  Inputs settled = f.inputs({finished});
  settled.ended = settled.succeeded = true;
  EXPECT_TRUE(decide(settled).writes.empty());
}

TEST(KueueLifecycle, AnEarlierJobsWorkloadsAreReleasedAndDeleted) {
  Fixture f;
  const Decision d = decide(f.inputs({workload("lm-core", Role::Core, "uid-old")}));
  ASSERT_EQ(kinds(d), (std::vector<Kind>{Kind::Release, Kind::Delete, Kind::Create}));
  EXPECT_EQ(d.writes[2].name, "lm-core");  // a 409 while the old one is still there; made next pass
  EXPECT_EQ(release_all({workload("a", Role::Core), workload("b", Role::Extension)}).size(), 4u);
}

TEST(KueueLifecycle, NoExtensionWhenThereIsNothingToExtend) {
  Fixture f(false, /*min=*/2, /*per=*/2, /*max=*/2);
  const Decision d = decide(f.inputs({admitted_core()}));
  EXPECT_TRUE(d.writes.empty());
  EXPECT_TRUE(d.run);
}

}  // namespace
}  // namespace swarm::op::kueue
