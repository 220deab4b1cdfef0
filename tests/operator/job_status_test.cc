// Status derivation (operator/controller/job_status.h): pure, no I/O. Every phase (Pending,
// Running, Degraded, Failed) and every condition the operator sets (SpecValid, Ready, Degraded,
// PoolOverflow, Failed, RegistryReachable) with its reasons, and the Events status changes call for.
#include "operator/controller/job_status.h"

#include <gtest/gtest.h>

#include "operator/kube/time_format.h"

namespace swarm::op {
namespace {

using planner::WorkerState;

constexpr const char* kNow = "2026-01-02T03:04:05Z";
constexpr const char* kEarlier = "2026-01-01T00:00:00Z";

PodView pod(const std::string& name, int stage, WorkerState state, const std::string& pool = "") {
  PodView v;
  v.name = name;
  v.key = "ns/" + name;
  v.role = "worker";
  v.stage = stage;
  v.state = state;
  v.pool = pool;
  return v;
}

// A job of `stages` stages, `per_stage` workers each, in the implicit pool (or the pools named).
struct Job {
  SwarmJob job;
  SwarmJobStatus previous;
  planner::PlacementInput in;
  planner::PlacementPlan plan;
  std::vector<PodView> workers, trainers;
  std::optional<planner::ClusterCapacity> capacity;
  std::optional<ProgressReading> reading;

  explicit Job(int stages = 2, int per_stage = 1, std::vector<std::string> pools = {""}) {
    job.name = "j";
    job.namespace_ = "ns";
    job.generation = 7;
    in.stages = stages;
    in.per_stage = per_stage;
    for (const auto& p : pools) in.pools.push_back({p, 0, -1, 0, 0, false});
  }
  void ready_everywhere() {
    for (int s = 0; s < in.stages; ++s)
      for (int i = 0; i < in.per_stage; ++i)
        workers.push_back(pod("w-" + std::to_string(s) + "-" + std::to_string(i), s, WorkerState::Ready,
                              in.pools.front().name));
  }
  DerivedStatus derive() const {
    return derive_status({job, previous, in, plan, workers, trainers, capacity ? &*capacity : nullptr,
                          reading ? &*reading : nullptr, kNow});
  }
};

const Condition& cond(const SwarmJobStatus& s, const std::string& type) {
  const Condition* c = find_condition(s.conditions, type);
  if (!c) throw std::runtime_error("no condition " + type);
  return *c;
}

void expect_condition(const SwarmJobStatus& s, const std::string& type, const std::string& status,
                      const std::string& reason, const std::string& message) {
  SCOPED_TRACE(type);
  const Condition* c = find_condition(s.conditions, type);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, status);
  EXPECT_EQ(c->reason, reason);
  EXPECT_EQ(c->message, message);
  EXPECT_EQ(c->observed_generation, 7);
}

ProgressReading good_reading(std::optional<JobFailure> failure = std::nullopt) {
  ProgressReading r;
  r.ok = true;
  r.url = "http://j-registry.ns.svc:7400";
  r.has_progress = true;
  r.progress.step = 12;
  r.progress.stages.resize(2);
  r.progress.stages[0].step = 12;
  r.progress.stages[1].stage = 1;
  r.progress.stages[1].step = 13;
  r.progress.stats.failure = failure;
  return r;
}

TEST(JobStatusTest, PendingUntilEveryStageHasItsMinimum) {
  Job j;
  j.workers = {pod("w-0", 0, WorkerState::Ready), pod("w-1", 1, WorkerState::Running)};
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Pending");
  EXPECT_EQ(d.status.observed_generation, 7);
  EXPECT_EQ(d.status.ready_workers, 1);
  EXPECT_EQ(d.status.desired_workers, 2);
  expect_condition(d.status, "SpecValid", "True", "Valid", "the spec is valid");
  expect_condition(d.status, "Ready", "False", "StagesUnderServed", "1/2 stages have at least 1 ready worker(s)");
  expect_condition(d.status, "Degraded", "False", "AsExpected", "1 stage(s) below spec.workers.minPerStage");
  expect_condition(d.status, "PoolOverflow", "False", "AllPoolsAvailable", "every pool is available");
  EXPECT_EQ(find_condition(d.status.conditions, "Failed"), nullptr);
  EXPECT_EQ(find_condition(d.status.conditions, "RegistryReachable"), nullptr);
  EXPECT_TRUE(d.events.empty());  // Pending -> Pending
  for (const auto& c : d.status.conditions) EXPECT_EQ(c.last_transition_time, kNow) << c.type;
}

TEST(JobStatusTest, RunningWhenEveryStageIsServed) {
  Job j;
  j.ready_everywhere();
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Running");
  expect_condition(d.status, "Ready", "True", "AllStagesServed", "2/2 stages have at least 1 ready worker(s)");
  expect_condition(d.status, "Degraded", "False", "AsExpected", "0 stage(s) below spec.workers.minPerStage");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Normal");
  EXPECT_EQ(d.events[0].reason, "PhaseRunning");
  EXPECT_EQ(d.events[0].message, "phase Pending -> Running");
  ASSERT_EQ(d.status.stages.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(d.status.stages[s].stage, s);
    EXPECT_EQ(d.status.stages[s].ready, 1);
    EXPECT_EQ(d.status.stages[s].desired, 1);
    EXPECT_EQ(d.status.stages[s].pending, 0);
  }
}

TEST(JobStatusTest, MinPerStageDecidesWhatServedMeans) {
  Job j(2, 3);
  j.job.op.min_per_stage = 2;
  j.workers = {pod("a", 0, WorkerState::Ready), pod("b", 0, WorkerState::Ready), pod("c", 1, WorkerState::Ready),
               pod("d", 1, WorkerState::Pending)};
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Pending");
  expect_condition(d.status, "Ready", "False", "StagesUnderServed", "1/2 stages have at least 2 ready worker(s)");
  EXPECT_EQ(d.status.desired_workers, 6);
  EXPECT_EQ(d.status.stages[1].pending, 1);
}

TEST(JobStatusTest, DegradedWhenARunningJobLosesAStage) {
  Job j;
  j.previous.phase = "Running";
  set_condition(j.previous.conditions, {"Degraded", "False", "AsExpected", "0 stage(s) below spec.workers.minPerStage", "", 7},
                kEarlier);
  set_condition(j.previous.conditions, {"SpecValid", "True", "Valid", "the spec is valid", "", 7}, kEarlier);
  j.workers = {pod("w-0", 0, WorkerState::Ready), pod("w-1", 1, WorkerState::Unschedulable)};
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Degraded");
  expect_condition(d.status, "Degraded", "True", "StageBelowMinimum", "1 stage(s) below spec.workers.minPerStage");
  expect_condition(d.status, "Ready", "False", "StagesUnderServed", "1/2 stages have at least 1 ready worker(s)");
  EXPECT_EQ(cond(d.status, "Degraded").last_transition_time, kNow);      // False -> True
  EXPECT_EQ(cond(d.status, "SpecValid").last_transition_time, kEarlier);  // unchanged
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Warning");
  EXPECT_EQ(d.events[0].reason, "PhaseDegraded");
  EXPECT_EQ(d.events[0].message, "phase Running -> Degraded");
  EXPECT_EQ(d.status.pools.at(0).unschedulable, 1);
}

TEST(JobStatusTest, DegradedStaysDegradedAndRecoversToRunning) {
  Job j;
  j.previous.phase = "Degraded";
  j.workers = {pod("w-0", 0, WorkerState::Ready)};
  DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Degraded");
  EXPECT_TRUE(d.events.empty());

  j.ready_everywhere();
  d = j.derive();
  EXPECT_EQ(d.status.phase, "Running");
  expect_condition(d.status, "Degraded", "False", "AsExpected", "0 stage(s) below spec.workers.minPerStage");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Normal");
  EXPECT_EQ(d.events[0].message, "phase Degraded -> Running");
}

TEST(JobStatusTest, FailedWhenTheRegistryReportsAFailure) {
  Job j;
  j.previous.phase = "Running";
  j.ready_everywhere();
  const JobFailure f{"StageReset", 1, 40, "stage 1 lost its last peer"};
  j.reading = good_reading(f);
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Failed");
  expect_condition(d.status, "Failed", "True", "StageReset", describe(f));
  expect_condition(d.status, "RegistryReachable", "True", "RegistryRead",
                   "progress read from http://j-registry.ns.svc:7400");
  ASSERT_TRUE(d.new_failure);
  EXPECT_EQ(*d.new_failure, f);
  ASSERT_EQ(d.events.size(), 2u);
  EXPECT_EQ(d.events[0].type, "Warning");
  EXPECT_EQ(d.events[0].reason, "StageReset");
  EXPECT_EQ(d.events[0].message, describe(f));
  EXPECT_EQ(d.events[1].type, "Warning");
  EXPECT_EQ(d.events[1].reason, "PhaseFailed");
  EXPECT_EQ(d.events[1].message, "phase Running -> Failed");
  EXPECT_EQ(d.status.step, 12);
  EXPECT_EQ(d.status.stages[1].step, 13);
}

TEST(JobStatusTest, AFailureStaysWithoutANewReadingAndIsNotReportedTwice) {
  Job j;
  j.ready_everywhere();
  j.previous.phase = "Failed";
  set_condition(j.previous.conditions, {"Failed", "True", "StageReset", "earlier", "", 7}, kEarlier);
  DerivedStatus d = j.derive();  // no reading
  EXPECT_EQ(d.status.phase, "Failed");
  EXPECT_TRUE(d.events.empty());
  EXPECT_FALSE(d.new_failure);

  j.reading = good_reading(JobFailure{"StageReset", 0, 3, ""});
  d = j.derive();  // the same failure read again
  EXPECT_EQ(d.status.phase, "Failed");
  EXPECT_FALSE(d.new_failure);
  EXPECT_TRUE(d.events.empty());
}

TEST(JobStatusTest, AGoodReadingClearsTheFailure) {
  Job j;
  j.ready_everywhere();
  j.previous.phase = "Failed";
  set_condition(j.previous.conditions, {"Failed", "True", "StageReset", "earlier", "", 7}, kEarlier);
  j.reading = good_reading();
  const DerivedStatus d = j.derive();
  expect_condition(d.status, "Failed", "False", "AsExpected", "the registry reports no failure");
  EXPECT_EQ(d.status.phase, "Running");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Normal");
  EXPECT_EQ(d.events[0].reason, "PhaseRunning");
  EXPECT_EQ(d.events[0].message, "phase Failed -> Running");
}

// Issue 29: another instance's checkpoints in the job's folder are said once: a condition naming
// the folder, and a Warning Event only when it turns True.
TEST(JobStatusTest, AnotherInstancesCheckpointsAreNamedByAConditionAndOneEvent) {
  Job j;
  j.ready_everywhere();
  j.previous.phase = "Running";
  j.job.spec.checkpoint.path = "/ckpt";
  j.job.op.checkpoint_claim = "claim";
  j.reading = good_reading();
  DerivedStatus d = j.derive();
  EXPECT_EQ(find_condition(d.status.conditions, "ForeignCheckpoints"), nullptr) << "none counted: no condition";
  j.reading->progress.stats.events["foreign_checkpoints"] = 3;
  d = j.derive();
  const Condition& c = cond(d.status, "ForeignCheckpoints");
  EXPECT_EQ(c.status, "True");
  EXPECT_EQ(c.reason, "AnotherInstancesCheckpoints");
  EXPECT_NE(c.message.find("checkpoint files in /ckpt/j were written by another instance"), std::string::npos)
      << c.message;
  EXPECT_NE(c.message.find("the workers counted 3, each file once per worker that found it"), std::string::npos)
      << c.message;
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Warning");
  EXPECT_EQ(d.events[0].reason, "ForeignCheckpoints");
  EXPECT_EQ(d.events[0].message, c.message);
  // The next reconcile: the condition stays, no second Event.
  j.previous = d.status;
  d = j.derive();
  EXPECT_EQ(cond(d.status, "ForeignCheckpoints").status, "True");
  EXPECT_TRUE(d.events.empty());
}

TEST(JobStatusTest, AFailedJobThatRecoversUnderServedIsPendingNotDegraded) {
  Job j;
  j.workers = {pod("w-0", 0, WorkerState::Ready)};
  j.previous.phase = "Failed";
  set_condition(j.previous.conditions, {"Failed", "True", "StageReset", "earlier", "", 7}, kEarlier);
  j.reading = good_reading();
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.phase, "Pending");
  expect_condition(d.status, "Degraded", "False", "AsExpected", "1 stage(s) below spec.workers.minPerStage");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Normal");
  EXPECT_EQ(d.events[0].message, "phase Failed -> Pending");
}

TEST(JobStatusTest, NoFailedConditionUntilAFailureWasSeen) {
  Job j;
  j.ready_everywhere();
  j.reading = good_reading();
  const DerivedStatus d = j.derive();
  EXPECT_EQ(find_condition(d.status.conditions, "Failed"), nullptr);
  EXPECT_EQ(d.status.phase, "Running");
}

TEST(JobStatusTest, RegistryReachabilityAndItsEvents) {
  Job j;
  j.ready_everywhere();
  j.previous.phase = "Running";
  j.previous.step = 5;
  j.reading = ProgressReading{};
  j.reading->error = "GET http://j-registry.ns.svc:7400/v1/stats: timed out";
  j.reading->error_reason = "RegistryUnreachable";
  DerivedStatus d = j.derive();
  expect_condition(d.status, "RegistryReachable", "False", "RegistryUnreachable",
                   "GET http://j-registry.ns.svc:7400/v1/stats: timed out (step, samplesPerSecond and stages[] keep "
                   "their values of no reading yet)");
  EXPECT_EQ(d.status.progress_read_time, "");
  EXPECT_EQ(d.status.step, 5);
  EXPECT_EQ(d.status.phase, "Running");  // reachability does not change the phase
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Warning");
  EXPECT_EQ(d.events[0].reason, "RegistryUnreachable");
  EXPECT_EQ(d.events[0].message, "GET http://j-registry.ns.svc:7400/v1/stats: timed out");

  j.previous = d.status;  // still unreachable: no second Event
  EXPECT_TRUE(j.derive().events.empty());
  // The last good reading was at 2026-12-03T10:00:00Z: the status says how old its figures are.
  j.reading->read_unix = 1796292000;
  d = j.derive();
  EXPECT_EQ(d.status.progress_read_time, "2026-12-03T10:00:00Z");
  expect_condition(d.status, "RegistryReachable", "False", "RegistryUnreachable",
                   "GET http://j-registry.ns.svc:7400/v1/stats: timed out (step, samplesPerSecond and stages[] keep "
                   "their values of the last reading, at 2026-12-03T10:00:00Z)");
  EXPECT_EQ(to_json(d.status)["progressReadTime"], "2026-12-03T10:00:00Z");
  j.previous = d.status;

  j.reading = good_reading();  // reachable again
  d = j.derive();
  expect_condition(d.status, "RegistryReachable", "True", "RegistryRead",
                   "progress read from http://j-registry.ns.svc:7400");
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, "Normal");
  EXPECT_EQ(d.events[0].reason, "RegistryReachable");
  EXPECT_EQ(d.events[0].message, "progress read from http://j-registry.ns.svc:7400 again");
  EXPECT_EQ(d.status.step, 12);
  EXPECT_EQ(d.status.progress_read_time, "") << "current figures carry no age";
  EXPECT_FALSE(to_json(d.status).contains("progressReadTime"));
}

TEST(JobStatusTest, PoolOverflowFromThePlansPoolChanges) {
  Job j(2, 1, {"spot", "stable"});
  j.workers = {pod("w-0", 0, WorkerState::Ready, "stable"), pod("w-1", 1, WorkerState::Ready, "stable")};
  j.plan.pool_changes.push_back({"spot", false, 1000.0, "Unschedulable"});
  DerivedStatus d = j.derive();
  expect_condition(d.status, "PoolOverflow", "True", "PoolUnschedulable",
                   "some pools cannot schedule workers; their workers run in the next pool by priority");
  ASSERT_EQ(d.status.pools.size(), 2u);
  const PoolStatus& spot = d.status.pools[0];
  EXPECT_EQ(spot.name, "spot");
  EXPECT_FALSE(spot.available);
  EXPECT_EQ(spot.reason, "Unschedulable");
  EXPECT_EQ(spot.unavailable_since, kNow);
  EXPECT_EQ(spot.retry_at, kube::format_time(kube::from_seconds(1000.0)));
  EXPECT_EQ(d.status.pools[1].name, "stable");
  EXPECT_TRUE(d.status.pools[1].available);
  EXPECT_EQ(d.status.pools[1].ready, 2);

  // The overflow carries over in status until the plan makes the pool available again.
  j.previous = d.status;
  j.plan.pool_changes.clear();
  d = j.derive();
  EXPECT_FALSE(d.status.pools[0].available);
  EXPECT_EQ(cond(d.status, "PoolOverflow").status, "True");
  j.previous = d.status;
  j.plan.pool_changes.push_back({"spot", true, 0, "Retry"});
  d = j.derive();
  EXPECT_TRUE(d.status.pools[0].available);
  EXPECT_EQ(d.status.pools[0].unavailable_since, "");
  EXPECT_EQ(d.status.pools[0].retry_at, "");
  expect_condition(d.status, "PoolOverflow", "False", "AllPoolsAvailable", "every pool is available");
}

TEST(JobStatusTest, ThePlanCountsPreemptionsReassignmentsAndNewWorkers) {
  Job j;
  j.previous.preemptions = 2;
  j.previous.stage_reassignments = 1;
  j.workers = {pod("w-0", 0, WorkerState::Ready), pod("w-1", 1, WorkerState::Ready)};
  j.workers[1].notice = planner::Notice{"GKESpotTermination", 30, false};
  j.workers[1].node = "n1";
  planner::DeleteWorker del;
  del.name = "w-1";
  del.stage = 1;
  del.preemption = true;
  j.plan.deletes.push_back(del);
  planner::DeleteWorker surplus;
  surplus.name = "nobody";
  j.plan.deletes.push_back(surplus);  // not a preemption
  planner::CreateWorker c;
  c.stage = 1;
  j.plan.creates.push_back(c);
  j.plan.reassignments = 2;
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.preemptions, 3);
  EXPECT_EQ(d.status.last_preemption_time, kNow);
  EXPECT_EQ(d.status.stage_reassignments, 3);
  EXPECT_EQ(d.status.stages[1].ready, 0);    // deleted now: not counted
  EXPECT_EQ(d.status.stages[1].pending, 1);  // its replacement
  EXPECT_EQ(d.status.reclaimed_nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(d.status.phase, "Pending");
  EXPECT_EQ((d.workers.at({"", 1, "Terminating"})), 1);
  EXPECT_EQ((d.workers.at({"", 0, "Ready"})), 1);
}

TEST(JobStatusTest, TerminatingAndStrayWorkersCountOnlyInTheMetrics) {
  Job j;
  j.workers = {pod("w-0", 0, WorkerState::Ready), pod("w-1", 1, WorkerState::Ready), pod("w-9", 9, WorkerState::Ready)};
  j.workers[1].terminating = true;
  PodView t = pod("t-0", -1, WorkerState::Ready);
  t.role = "trainer";
  PodView gone = t;
  gone.terminating = true;
  j.trainers = {t, gone};
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.ready_workers, 1);
  EXPECT_EQ(d.status.stages[1].ready, 0);
  EXPECT_EQ(d.status.trainers_ready, 1);
  EXPECT_EQ((d.workers.at({"", 1, "Terminating"})), 1);
  EXPECT_EQ((d.workers.at({"", 9, "Ready"})), 1);
}

TEST(JobStatusTest, PoolsCarryCapacityAndTheImplicitPoolIsNamedDefault) {
  Job j;
  j.ready_everywhere();
  j.capacity = planner::ClusterCapacity{};
  planner::PoolCapacity pc;
  pc.nodes = 3;
  pc.under_notice = 1;
  pc.unusable = 1;
  pc.free_slots = 4;
  pc.used_slots = 2;
  j.capacity->pools.push_back(pc);
  const DerivedStatus d = j.derive();
  ASSERT_EQ(d.status.pools.size(), 1u);
  const PoolStatus& p = d.status.pools[0];
  EXPECT_EQ(p.name, "default");
  EXPECT_TRUE(p.capacity_known);
  EXPECT_EQ(p.nodes, 3);
  EXPECT_EQ(p.nodes_under_notice, 1);
  EXPECT_EQ(p.nodes_unavailable, 1);
  EXPECT_EQ(p.free_slots, 4);
  EXPECT_EQ(p.used_slots, 2);
  EXPECT_EQ(p.workers, 2);
  EXPECT_EQ(p.ready, 2);

  j.capacity.reset();
  EXPECT_FALSE(j.derive().status.pools[0].capacity_known);
}

TEST(JobStatusTest, TheRegistrysStageFiguresCarryOver) {
  Job j;
  j.ready_everywhere();
  StageStatus old;
  old.stage = 1;
  old.step = 9;
  old.samples_per_second = 2.5;
  old.queue_length = 4;
  old.peers = 2;
  old.ready = 5;  // recounted
  StageStatus stray = old;
  stray.stage = 5;  // beyond the stages: dropped
  j.previous.stages = {old, stray};
  const DerivedStatus d = j.derive();
  ASSERT_EQ(d.status.stages.size(), 2u);
  EXPECT_EQ(d.status.stages[1].step, 9);
  EXPECT_DOUBLE_EQ(d.status.stages[1].samples_per_second, 2.5);
  EXPECT_EQ(d.status.stages[1].queue_length, 4);
  EXPECT_EQ(d.status.stages[1].peers, 2);
  EXPECT_EQ(d.status.stages[1].ready, 1);
  EXPECT_EQ(d.status.stages[0].step, 0);
}

TEST(JobStatusTest, AnInvalidSpecFailsTheJob) {
  SwarmJobStatus previous;
  previous.phase = "Running";
  previous.preemptions = 4;
  set_condition(previous.conditions, {"SpecValid", "True", "Valid", "the spec is valid", "", 6}, kEarlier);
  const SwarmJobStatus s = invalid_spec_status(previous, 7, "spec.pipeline.stages: must be >= 1, got 0", kNow);
  EXPECT_EQ(s.phase, "Failed");
  EXPECT_EQ(s.observed_generation, 7);
  EXPECT_EQ(s.preemptions, 4);
  expect_condition(s, "SpecValid", "False", "InvalidSpec", "spec.pipeline.stages: must be >= 1, got 0");
  EXPECT_EQ(cond(s, "SpecValid").last_transition_time, kNow);
  EXPECT_EQ(s.conditions.size(), 1u);
}

PodView trainer(const std::string& name, bool succeeded, const std::string& message) {
  PodView v = pod(name, -1, succeeded ? WorkerState::Pending : WorkerState::Ready);
  v.role = "trainer";
  v.succeeded = succeeded;
  v.termination_message = message;
  return v;
}

std::vector<StatusEvent> exports(const DerivedStatus& d) {
  std::vector<StatusEvent> out;
  for (const auto& e : d.events)
    if (e.reason == "ModelExported") out.push_back(e);
  return out;
}

// Trainer 0 ends training with {"exportedModel": LOCATION, "step": N} as its termination message:
// once its pod Succeeded, status.exportedModel/exportedStep say where the model is, with one
// ModelExported Event; the status keeps it, and only a later step replaces it.
TEST(JobStatusTest, ExportedModelFromASucceededTrainersTerminationMessage) {
  Job j;
  j.ready_everywhere();
  const std::string message = R"({"exportedModel":"s3://ckpts/runs/j/export/model.safetensors","step":300})";
  j.trainers = {trainer("j-t-0", false, message), trainer("j-t-1", true, "")};
  EXPECT_EQ(j.derive().status.exported_model, "") << "a trainer that has not Succeeded does not count";

  j.trainers[0].succeeded = true;
  const DerivedStatus d = j.derive();
  EXPECT_EQ(d.status.exported_model, "s3://ckpts/runs/j/export/model.safetensors");
  EXPECT_EQ(d.status.exported_step, 300);
  ASSERT_EQ(exports(d).size(), 1u);
  EXPECT_EQ(exports(d)[0].type, "Normal");
  EXPECT_EQ(exports(d)[0].message, "model exported to s3://ckpts/runs/j/export/model.safetensors at step 300 (trainer j-t-0)");
  EXPECT_EQ(to_json(d.status)["exportedModel"], "s3://ckpts/runs/j/export/model.safetensors");

  j.previous = d.status;  // the next reconcile: same pods, no second Event
  EXPECT_TRUE(exports(j.derive()).empty());
  EXPECT_EQ(j.derive().status.exported_step, 300);
  j.trainers.clear();  // the pod is gone: the status keeps it
  EXPECT_EQ(j.derive().status.exported_model, "s3://ckpts/runs/j/export/model.safetensors");

  j.trainers = {trainer("j-t-0", true, R"({"exportedModel":"/ckpt/j/export/old.safetensors","step":200})")};
  EXPECT_EQ(j.derive().status.exported_step, 300) << "an earlier step does not replace it";
  EXPECT_TRUE(exports(j.derive()).empty());
  j.trainers = {trainer("j-t-0", true, R"({"exportedModel":"/ckpt/j/export/model.safetensors","step":600})" "\n")};
  const DerivedStatus later = j.derive();
  EXPECT_EQ(later.status.exported_model, "/ckpt/j/export/model.safetensors");
  EXPECT_EQ(later.status.exported_step, 600);
  EXPECT_EQ(exports(later).size(), 1u);
}

// Whatever a trainer leaves in its termination message (a crash report, a truncated line, another
// shape) is ignored: no export, no Event, no throw.
TEST(JobStatusTest, ABadTerminationMessageIsIgnored) {
  std::vector<std::string> bad = {
      "", "not json", "{", R"({"exportedModel":"m","step":3)", "[]", "null", "42", R"("s3://b/m")",
      R"({"exportedModel":1,"step":2})", R"({"exportedModel":"m"})", R"({"step":2})",
      R"({"exportedModel":"m","step":-1})", R"({"exportedModel":"","step":3})", R"({"exportedModel":"m","step":"3"})",
      R"({"exportedModel":"m","step":1.5})", R"({"exportedModel":"m","step":1e30})",
      R"({"exportedModel":"m","step":18446744073709551615})", R"({"exportedModel":null,"step":3})",
      "\xff\xfe{}", "panic: out of memory\n"};
  const char nul[] = "{\"exportedModel\":\"m\0\",\"step\":3}";  // a NUL inside the string
  bad.push_back(std::string(nul, sizeof(nul) - 1));
  for (const auto& message : bad) {
    SCOPED_TRACE(message);
    EXPECT_EQ(parse_model_export(message), std::nullopt);
    Job j;
    j.ready_everywhere();
    j.trainers = {trainer("j-t-0", true, message)};
    DerivedStatus d;
    ASSERT_NO_THROW(d = j.derive());
    EXPECT_EQ(d.status.exported_model, "");
    EXPECT_FALSE(to_json(d.status).contains("exportedModel"));
    EXPECT_TRUE(exports(d).empty());
  }
  // A bad message next to a good one: the good one counts.
  Job j;
  j.trainers = {trainer("j-t-1", true, "{"), trainer("j-t-0", true, R"({"exportedModel":"/m","step":0})")};
  EXPECT_EQ(j.derive().status.exported_model, "/m");
  const auto ok = parse_model_export(" {\"step\": 7, \"exportedModel\": \"s3://b/p/model.safetensors\", \"extra\": 1}\n");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->location, "s3://b/p/model.safetensors");
  EXPECT_EQ(ok->step, 7);
}

}  // namespace
}  // namespace swarm::op
