// Placement rules (planner/placement.h), one test per rule.
#include "planner/placement.h"

#include <gtest/gtest.h>

#include <map>

namespace swarm::planner {
namespace {

PoolInfo pool(const std::string& name, int priority, int max = -1) { return {name, priority, max, 0, 0}; }

WorkerInfo worker(const std::string& name, int stage, const std::string& pool, int slot,
                  WorkerState state = WorkerState::Ready) {
  WorkerInfo w;
  w.name = name;
  w.stage = stage;
  w.pool = pool;
  w.slot = slot;
  w.state = state;
  w.node = "node-" + name;
  return w;
}

PlacementInput input(int stages, int per_stage, std::vector<PoolInfo> pools) {
  PlacementInput in;
  in.stages = stages;
  in.per_stage = per_stage;
  in.max_per_stage = per_stage + 1;
  in.pools = std::move(pools);
  in.now = 1000;
  in.unschedulable_seconds = 60;
  in.retry_pool_seconds = 300;
  return in;
}

std::map<std::string, int> creates_by_pool(const PlacementPlan& p) {
  std::map<std::string, int> m;
  for (const auto& c : p.creates) ++m[c.pool];
  return m;
}

TEST(Placement, FreshJobFillsPreferredPoolUpToItsLimitThenTheNext) {
  auto plan = plan_workers(input(3, 2, {pool("us", 100, 4), pool("eu", 50), pool("od", 10)}));
  ASSERT_EQ(plan.creates.size(), 6u);
  EXPECT_EQ(creates_by_pool(plan)["us"], 4);
  EXPECT_EQ(creates_by_pool(plan)["eu"], 2);
  std::map<int, int> stages;
  std::set<int> slots;
  for (const auto& c : plan.creates) {
    ++stages[c.stage];
    slots.insert(c.slot);
    EXPECT_EQ(c.reason, "Initial");
  }
  EXPECT_EQ(stages, (std::map<int, int>{{0, 2}, {1, 2}, {2, 2}}));
  EXPECT_EQ(slots, (std::set<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(plan.deletes.empty());
}

TEST(Placement, EqualPrioritiesShareTheWorkers) {
  auto plan = plan_workers(input(2, 2, {pool("a", 5), pool("b", 5)}));
  EXPECT_EQ(creates_by_pool(plan)["a"], 2);
  EXPECT_EQ(creates_by_pool(plan)["b"], 2);
}

TEST(Placement, SettledJobIsLeftAlone) {
  auto in = input(2, 1, {pool("us", 100)});
  in.workers = {worker("w0", 0, "us", 0), worker("w1", 1, "us", 1)};
  auto plan = plan_workers(in);
  EXPECT_TRUE(plan.creates.empty());
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_EQ(plan.requeue_at, 0);
}

TEST(Placement, ReclaimNoticeDeletesWithGraceAndReplacesAtOnce) {
  auto in = input(2, 1, {pool("us", 100), pool("eu", 50)});
  in.workers = {worker("w0", 0, "us", 0), worker("w1", 1, "us", 1)};
  in.workers[0].notice = Notice{"GKESpotTermination", 30, false};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "w0");
  EXPECT_EQ(plan.deletes[0].grace_seconds, 30);
  EXPECT_TRUE(plan.deletes[0].preemption);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].stage, 0);
  EXPECT_EQ(plan.creates[0].slot, 2);  // slots 0 and 1 are still held
  EXPECT_EQ(plan.creates[0].replaces, "w0");
  EXPECT_EQ(plan.creates[0].reason, "Replacement");
}

TEST(Placement, LostNodeDeletesAtOnce) {
  auto in = input(2, 1, {pool("us", 100)});
  in.workers = {worker("w0", 0, "us", 0), worker("w1", 1, "us", 1)};
  in.workers[1].notice = Notice{"NodeNotReady", 0, true};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].grace_seconds, 0);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].stage, 1);
}

TEST(Placement, TerminatingWorkersAreNotCountedNorDeletedAgain) {
  auto in = input(2, 1, {pool("us", 100)});
  in.workers = {worker("w0", 0, "us", 0), worker("w1", 1, "us", 1), worker("w2", 0, "us", 2, WorkerState::Pending)};
  in.workers[0].terminating = true;
  in.workers[0].notice = Notice{"GKESpotTermination", 30, false};
  auto plan = plan_workers(in);
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_TRUE(plan.creates.empty());
}

TEST(Placement, UnschedulablePoolOverflowsAfterTheWindowAndComesBackLater) {
  auto in = input(2, 1, {pool("us", 100), pool("eu", 50)});
  in.workers = {worker("w0", 0, "us", 0, WorkerState::Unschedulable), worker("w1", 1, "us", 1)};
  in.workers[0].unschedulable_since = 990;  // 10 s: not yet
  auto plan = plan_workers(in);
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_DOUBLE_EQ(plan.requeue_at, 1050);

  in.workers[0].unschedulable_since = 900;  // 100 s > 60 s
  plan = plan_workers(in);
  ASSERT_EQ(plan.pool_changes.size(), 1u);
  EXPECT_EQ(plan.pool_changes[0].pool, "us");
  EXPECT_FALSE(plan.pool_changes[0].available);
  EXPECT_DOUBLE_EQ(plan.pool_changes[0].until, 1300);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].reason, "Unschedulable");
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].pool, "eu");
  EXPECT_EQ(plan.creates[0].reason, "Overflow");

  // While unavailable, new workers avoid it.
  auto later = input(2, 1, {pool("us", 100), pool("eu", 50)});
  later.pools[0].unavailable_until = 1300;
  later.workers = {worker("w1", 1, "us", 1)};
  plan = plan_workers(later);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].pool, "eu");
  EXPECT_DOUBLE_EQ(plan.requeue_at, 1300);

  // Retry time passed: available again.
  later.now = 1301;
  plan = plan_workers(later);
  ASSERT_EQ(plan.pool_changes.size(), 1u);
  EXPECT_TRUE(plan.pool_changes[0].available);
  EXPECT_EQ(plan.creates[0].pool, "us");
}

TEST(Placement, OnlyPoolNeverOverflows) {
  auto in = input(2, 1, {pool("", 0)});
  in.workers = {worker("w0", 0, "", 0, WorkerState::Unschedulable), worker("w1", 1, "", 1)};
  in.workers[0].unschedulable_since = 0;
  auto plan = plan_workers(in);
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_TRUE(plan.pool_changes.empty());
}

TEST(Placement, SettledWorkersMoveBackToAPreferredPoolOneAtATime) {
  auto in = input(2, 1, {pool("us", 100), pool("eu", 50)});
  in.workers = {worker("w0", 0, "eu", 0), worker("w1", 1, "eu", 1)};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].pool, "us");
  EXPECT_EQ(plan.creates[0].reason, "MoveBack");
  EXPECT_TRUE(plan.deletes.empty());

  // The surge pod is ready: the one in the less preferred pool goes.
  in.workers.push_back(worker("w2", plan.creates[0].stage, "us", 2));
  plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].reason, "MovedBack");
  EXPECT_EQ(plan.deletes[0].pool, "eu");
  EXPECT_TRUE(plan.creates.empty());
}

TEST(Placement, NoMoveBackIntoAFullPool) {
  auto in = input(2, 1, {pool("us", 100, 1), pool("eu", 50)});
  in.workers = {worker("w0", 0, "us", 0), worker("w1", 1, "eu", 1)};
  auto plan = plan_workers(in);
  EXPECT_TRUE(plan.creates.empty());
  EXPECT_TRUE(plan.deletes.empty());
}

TEST(Placement, EmptyStageWithoutRoomTakesAWorkerFromTheFullestStage) {
  auto in = input(2, 2, {pool("us", 100, 2)});
  in.workers = {worker("w0", 1, "us", 0), worker("w1", 1, "us", 1)};
  auto plan = plan_workers(in);
  EXPECT_EQ(plan.reassignments, 1);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].reason, "Reassigned");
  bool created_for_0 = false;
  for (const auto& c : plan.creates) created_for_0 |= c.stage == 0;
  EXPECT_TRUE(created_for_0);
}

TEST(Placement, StarvingStageTakesCapacityOfAReadyWorker) {
  auto in = input(2, 2, {pool("gpu", 0, 4)});
  in.workers = {worker("w0", 0, "gpu", 0, WorkerState::Unschedulable), worker("w1", 0, "gpu", 1, WorkerState::Unschedulable),
                worker("w2", 1, "gpu", 2), worker("w3", 1, "gpu", 3)};
  in.workers[0].unschedulable_since = in.workers[1].unschedulable_since = 999;
  auto plan = plan_workers(in);
  EXPECT_EQ(plan.reassignments, 1);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].stage, 1);
  EXPECT_EQ(plan.deletes[0].reason, "Reassigned");
  EXPECT_TRUE(plan.creates.empty()) << "stage 1's replacement would compete with stage 0";

  // Not again while the first one is still terminating.
  in.workers[3].terminating = true;
  plan = plan_workers(in);
  EXPECT_EQ(plan.reassignments, 0);
}

TEST(Placement, ApplyingAPlanTwiceChangesNothing) {
  auto in = input(3, 2, {pool("us", 100, 4), pool("eu", 50)});
  auto plan = plan_workers(in);
  for (const auto& c : plan.creates) {
    in.workers.push_back(worker("w" + std::to_string(c.slot), c.stage, c.pool, c.slot, WorkerState::Pending));
  }
  auto again = plan_workers(in);
  EXPECT_TRUE(again.creates.empty());
  EXPECT_TRUE(again.deletes.empty());
}

}  // namespace
}  // namespace swarm::planner
