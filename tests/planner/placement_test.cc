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

TEST(Placement, StageTargetsAreWhatEachStageGetsNeverMore) {
  // A quota admitted 3 workers for stage 0 and 1 for stage 1 (perStage says 2, maxPerStage 3).
  auto in = input(2, 2, {pool("us", 100), pool("eu", 50)});
  in.stage_targets = {3, 1};
  EXPECT_EQ(desired_workers(in, 0), 3);
  EXPECT_EQ(most_workers(in, 1), 1);
  auto plan = plan_workers(in);
  std::map<int, int> stages;
  for (const auto& c : plan.creates) ++stages[c.stage];
  EXPECT_EQ(stages, (std::map<int, int>{{0, 3}, {1, 1}}));

  // The admission shrinks (an extension evicted): the surplus goes, ready workers with their grace.
  in.stage_targets = {1, 1};
  in.workers = {worker("a", 0, "us", 0), worker("b", 0, "us", 1), worker("c", 0, "eu", 2), worker("d", 1, "us", 3)};
  plan = plan_workers(in);
  EXPECT_TRUE(plan.creates.empty());
  ASSERT_EQ(plan.deletes.size(), 2u);
  EXPECT_EQ(plan.deletes[0].name, "c");  // least preferred pool first
  EXPECT_EQ(plan.deletes[0].grace_seconds, 30);
  EXPECT_EQ(plan.deletes[1].name, "b");

  // A reclaimed worker is still replaced inside the target; no move-back surges past it.
  in.workers = {worker("a", 0, "eu", 0), worker("d", 1, "us", 3)};
  in.workers[0].notice = Notice{"GKESpotTermination", 30, false};
  plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].stage, 0);
  EXPECT_EQ(plan.creates[0].replaces, "a");
  in.workers = {worker("a", 0, "eu", 0), worker("d", 1, "us", 3)};
  plan = plan_workers(in);
  EXPECT_TRUE(plan.creates.empty()) << "a move-back to us would surge past the target";
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

// --- Capacity-aware placement (PlacementInput::capacity) ---

NodeSlots slots(const std::string& node, int free, std::vector<std::string> pools) { return {node, free, std::move(pools)}; }

WorkerInfo bound(const std::string& name, int stage, const std::string& pool, int slot, const std::string& node,
                 WorkerState state = WorkerState::Ready) {
  WorkerInfo w = worker(name, stage, pool, slot, state);
  w.node = node;
  return w;
}

WorkerInfo unbound(const std::string& name, int stage, const std::string& pool, int slot,
                   WorkerState state = WorkerState::Unschedulable, double since = 990) {
  WorkerInfo w = worker(name, stage, pool, slot, state);
  w.node = "";
  w.unschedulable_since = since;
  return w;
}

std::map<int, int> creates_by_stage(const PlacementPlan& p) {
  std::map<int, int> m;
  for (const auto& c : p.creates) ++m[c.stage];
  return m;
}

// The incident of issue 18: 3 of 7 nodes deleted at once, spot-us's last node under a notice.
TEST(PlacementCapacity, MassLossGoesStraightToPoolsWithFreeSlotsInPriorityOrder) {
  auto in = input(3, 2, {pool("spot-us", 100, 4), pool("spot-eu", 50), pool("on-demand", 10)});
  in.max_per_stage = 3;
  const Notice lost{"NodeDeleted", 0, true};
  in.workers = {bound("w0", 0, "spot-us", 0, "us-0"), bound("w1", 1, "spot-us", 1, "us-0"),
                bound("w2", 2, "spot-us", 2, "us-1"), bound("w3", 0, "spot-us", 3, "us-1"),
                bound("w4", 1, "spot-eu", 4, "eu-0"), bound("w5", 2, "spot-eu", 5, "eu-0")};
  for (auto& w : in.workers) w.notice = lost;  // us-0, us-1 and eu-0 are gone; us-2 has a notice
  in.capacity = std::vector<NodeSlots>{slots("eu-1", 2, {"spot-eu"}), slots("eu-2", 2, {"spot-eu"}),
                                       slots("od-0", 2, {"on-demand"})};
  auto plan = plan_workers(in);
  EXPECT_EQ(plan.deletes.size(), 6u);
  ASSERT_EQ(plan.creates.size(), 6u);
  EXPECT_EQ(creates_by_pool(plan)["spot-us"], 0);
  EXPECT_EQ(creates_by_pool(plan)["spot-eu"], 4);
  EXPECT_EQ(creates_by_pool(plan)["on-demand"], 2);
  EXPECT_EQ(creates_by_stage(plan), (std::map<int, int>{{0, 2}, {1, 2}, {2, 2}}));
  for (const auto& c : plan.creates) {
    EXPECT_FALSE(c.waits) << c.pool;
    EXPECT_EQ(c.reason, "Replacement");
    EXPECT_NE(c.why.find("spot-us: no free slot"), std::string::npos) << c.why;
  }
  EXPECT_TRUE(plan.pool_changes.empty());  // nothing marked unavailable: no timer involved
  // Applied: the replacements hold the slots they were planned into; nothing else happens.
  PlacementInput next = in;
  next.workers.clear();
  next.capacity = std::vector<NodeSlots>{slots("eu-1", 2, {"spot-eu"}), slots("eu-2", 2, {"spot-eu"}),
                                         slots("od-0", 2, {"on-demand"})};
  for (const auto& c : plan.creates)
    next.workers.push_back(unbound("w" + std::to_string(c.slot), c.stage, c.pool, c.slot, WorkerState::Pending));
  auto again = plan_workers(next);
  EXPECT_TRUE(again.creates.empty());
  EXPECT_TRUE(again.deletes.empty());
}

TEST(PlacementCapacity, EmptyStagesAreFilledFirstWhenSlotsAreScarce) {
  auto in = input(3, 2, {pool("a", 10)});
  in.workers = {bound("w0", 1, "a", 0, "n0"), bound("w1", 1, "a", 1, "n0"), bound("w2", 2, "a", 2, "n1")};
  in.capacity = std::vector<NodeSlots>{slots("n1", 1, {"a"})};
  auto plan = plan_workers(in);
  // One free slot: stage 0 (no worker) gets it, not stage 2 (one); nothing is created to wait
  // for the next slot (it would compete with the stages that need it more).
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].stage, 0);
  EXPECT_FALSE(plan.creates[0].waits);
}

TEST(PlacementCapacity, AStrandedWorkerMovesAtOnceToAPoolWithAFreeSlot) {
  auto in = input(2, 1, {pool("us", 100), pool("eu", 50)});
  in.workers = {unbound("w0", 0, "us", 0, WorkerState::Unschedulable, 999), bound("w1", 1, "eu", 1, "eu-0")};
  in.capacity = std::vector<NodeSlots>{slots("us-0", 0, {"us"}), slots("eu-0", 1, {"eu"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "w0");
  EXPECT_EQ(plan.deletes[0].reason, "NoCapacity");
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].pool, "eu");
  EXPECT_EQ(plan.creates[0].stage, 0);
  EXPECT_EQ(plan.creates[0].replaces, "w0");
  EXPECT_FALSE(plan.creates[0].waits);
  EXPECT_TRUE(plan.pool_changes.empty());

  // A pod the scheduler has not judged yet is left to it.
  in.workers[0].state = WorkerState::Pending;
  EXPECT_TRUE(plan_workers(in).deletes.empty());
  // No free slot anywhere: it stays where it waits (no churn).
  in.workers[0].state = WorkerState::Unschedulable;
  in.capacity = std::vector<NodeSlots>{slots("us-0", 0, {"us"}), slots("eu-0", 0, {"eu"})};
  plan = plan_workers(in);
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_TRUE(plan.creates.empty());
}

TEST(PlacementCapacity, OnlyAsManyStrandedWorkersMoveAsThereAreFreeSlots) {
  auto in = input(2, 2, {pool("us", 100), pool("eu", 50)});
  in.workers = {unbound("w0", 0, "us", 0), unbound("w1", 0, "us", 1), unbound("w2", 1, "us", 2),
                bound("w3", 1, "eu", 3, "eu-0")};
  in.capacity = std::vector<NodeSlots>{slots("eu-0", 1, {"eu"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].stage, 0);  // the stage with no serving worker first
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].pool, "eu");
  EXPECT_EQ(plan.creates[0].stage, 0);
}

TEST(PlacementCapacity, AFullPoolIsPassedOverWithoutWaiting) {
  auto in = input(2, 1, {pool("us", 100), pool("eu", 50), pool("od", 10)});
  in.capacity = std::vector<NodeSlots>{slots("us-0", 0, {"us"}), slots("eu-0", 1, {"eu"}), slots("od-0", 4, {"od"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 2u);
  EXPECT_EQ(creates_by_pool(plan)["eu"], 1);
  EXPECT_EQ(creates_by_pool(plan)["od"], 1);
  for (const auto& c : plan.creates) {
    EXPECT_FALSE(c.waits);
    EXPECT_EQ(c.reason, "Initial");
  }
  EXPECT_NE(plan.creates[1].why.find("eu: no free slot"), std::string::npos) << plan.creates[1].why;
  // maxWorkers still bounds a pool with free slots; with no room left the second is not created.
  in.pools[2].max_workers = 0;
  plan = plan_workers(in);
  EXPECT_EQ(creates_by_pool(plan)["od"], 0);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].pool, "eu");
}

TEST(PlacementCapacity, AnAutoscaledPoolKeepsItsReplacementWhileASurgeWorkerServes) {
  auto in = input(2, 1, {pool("auto", 100), pool("eu", 50)});
  in.pools[0].autoscaled = true;
  in.workers = {bound("w0", 0, "auto", 0, "auto-0"), bound("w1", 1, "auto", 1, "auto-1")};
  in.workers[0].notice = Notice{"NodeDeleted", 0, true};
  in.capacity = std::vector<NodeSlots>{slots("auto-1", 0, {"auto"}), slots("eu-0", 2, {"eu"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 2u);
  EXPECT_EQ(plan.creates[0].pool, "auto");
  EXPECT_EQ(plan.creates[0].reason, "Replacement");
  EXPECT_TRUE(plan.creates[0].waits);
  EXPECT_EQ(plan.creates[1].pool, "eu");
  EXPECT_EQ(plan.creates[1].reason, "Surge");
  EXPECT_EQ(plan.creates[1].stage, 0);
  EXPECT_FALSE(plan.creates[1].waits);

  // Next pass: the replacement waits (within unschedulableSeconds), the surge worker runs.
  in.workers = {unbound("w2", 0, "auto", 2, WorkerState::Unschedulable, 995), bound("w3", 0, "eu", 3, "eu-0"),
                bound("w1", 1, "auto", 1, "auto-1")};
  in.capacity = std::vector<NodeSlots>{slots("auto-1", 0, {"auto"}), slots("eu-0", 1, {"eu"})};
  plan = plan_workers(in);
  EXPECT_TRUE(plan.creates.empty());
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_DOUBLE_EQ(plan.requeue_at, 1055);

  // The autoscaler's node came: the replacement is ready, the surge worker retires.
  in.workers[0] = bound("w2", 0, "auto", 2, "auto-2");
  plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "w3");
  EXPECT_EQ(plan.deletes[0].reason, "MovedBack");
  EXPECT_TRUE(plan.creates.empty());

  // Or it never came: after unschedulableSeconds the pool overflows; the surge worker stays.
  in.workers[0] = unbound("w2", 0, "auto", 2, WorkerState::Unschedulable, 900);
  plan = plan_workers(in);
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].reason, "Unschedulable");
  EXPECT_TRUE(plan.creates.empty());
  ASSERT_EQ(plan.pool_changes.size(), 1u);
  EXPECT_FALSE(plan.pool_changes[0].available);
}

TEST(PlacementCapacity, NoSurgeBeyondMaxPerStageOrWithoutAFreeSlot) {
  auto in = input(1 + 1, 1, {pool("auto", 100), pool("eu", 50)});
  in.pools[0].autoscaled = true;
  in.max_per_stage = 1;
  in.workers = {bound("w1", 1, "eu", 1, "eu-0")};
  in.capacity = std::vector<NodeSlots>{slots("eu-0", 3, {"eu"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);  // stage 0: its one worker waits in auto; no room for a surge
  EXPECT_TRUE(plan.creates[0].waits);
  in.max_per_stage = 2;
  in.capacity = std::vector<NodeSlots>{slots("eu-0", 0, {"eu"})};
  plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);  // no free slot anywhere: no surge
}

TEST(PlacementCapacity, AnEmptyStageTakesTheSlotOfTheFullestStageInTheSamePass) {
  // Four one-GPU nodes, one pool; stage 0's two nodes are gone, stage 1 holds the other two.
  auto in = input(2, 2, {pool("gpu", 0, 4)});
  in.workers = {bound("w0", 0, "gpu", 0, "n0"), bound("w1", 0, "gpu", 1, "n1"), bound("w2", 1, "gpu", 2, "n2"),
                bound("w3", 1, "gpu", 3, "n3")};
  in.workers[0].notice = in.workers[1].notice = Notice{"NodeDeleted", 0, true};
  in.capacity = std::vector<NodeSlots>{slots("n2", 0, {"gpu"}), slots("n3", 0, {"gpu"})};
  auto plan = plan_workers(in);
  EXPECT_EQ(plan.reassignments, 1);
  int reassigned = 0;
  for (const auto& d : plan.deletes)
    if (d.reason == "Reassigned") {
      ++reassigned;
      EXPECT_EQ(d.stage, 1);
    }
  EXPECT_EQ(reassigned, 1);
  ASSERT_EQ(plan.creates.size(), 1u);  // the freed slot's; no second one to compete for it
  EXPECT_EQ(plan.creates[0].stage, 0);
  EXPECT_EQ(plan.creates[0].reason, "Reassigned");
  EXPECT_FALSE(plan.creates[0].waits);
  EXPECT_NE(plan.creates[0].why.find("took the slot of"), std::string::npos) << plan.creates[0].why;

  // Next pass: the taken worker is terminating; its slot is the stage-0 worker's: no second steal.
  PlacementInput next = input(2, 2, {pool("gpu", 0, 4)});
  next.workers = {bound("w3", 1, "gpu", 3, "n3"), bound("w2", 1, "gpu", 2, "n2")};
  for (const auto& d : plan.deletes)
    if (d.name == "w2") next.workers[1].terminating = true;
    else if (d.name == "w3") next.workers[0].terminating = true;
  for (const auto& c : plan.creates) next.workers.push_back(unbound("w" + std::to_string(c.slot), 0, "gpu", c.slot));
  next.capacity = std::vector<NodeSlots>{slots("n2", 0, {"gpu"}), slots("n3", 0, {"gpu"})};
  auto again = plan_workers(next);
  EXPECT_EQ(again.reassignments, 0);
  EXPECT_TRUE(again.deletes.empty());
}

TEST(PlacementCapacity, MoveBackOnlyIntoAPoolWithAFreeSlot) {
  auto in = input(2, 1, {pool("us", 100), pool("eu", 50)});
  in.workers = {bound("w0", 0, "eu", 0, "eu-0"), bound("w1", 1, "eu", 1, "eu-0")};
  in.capacity = std::vector<NodeSlots>{slots("us-0", 0, {"us"}), slots("eu-0", 0, {"eu"})};
  EXPECT_TRUE(plan_workers(in).creates.empty());
  in.capacity = std::vector<NodeSlots>{slots("us-0", 1, {"us"}), slots("eu-0", 0, {"eu"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].reason, "MoveBack");
  EXPECT_EQ(plan.creates[0].pool, "us");
}

TEST(PlacementCapacity, OverlappingPoolsCountASharedSlotOnce) {
  auto in = input(2, 1, {pool("a", 10), pool("b", 10)});
  in.capacity = std::vector<NodeSlots>{slots("n", 1, {"a", "b"})};
  auto plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_FALSE(plan.creates[0].waits);
}

TEST(PlacementCapacity, AStageWaitingForASlotGetsTheNextOneFirst) {
  // No room: nothing created. A slot frees: the empty stage's worker takes it.
  auto in = input(2, 1, {pool("a", 10)});
  in.workers = {bound("w1", 1, "a", 1, "n0")};
  in.capacity = std::vector<NodeSlots>{slots("n0", 0, {"a"})};
  auto plan = plan_workers(in);
  EXPECT_TRUE(plan.creates.empty());
  EXPECT_TRUE(plan.deletes.empty());
  in.capacity = std::vector<NodeSlots>{slots("n0", 1, {"a"})};
  plan = plan_workers(in);
  ASSERT_EQ(plan.creates.size(), 1u);
  EXPECT_EQ(plan.creates[0].stage, 0);
}

}  // namespace
}  // namespace swarm::planner
