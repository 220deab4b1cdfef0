// The preemption schedule of `swarm local`: seeded and repeatable, notice then kill, respawns.
#include <gtest/gtest.h>

#include "worker/local/preemption.h"

namespace swarm::runtime {
namespace {

std::vector<std::string> run(PreemptionOptions o, double until) {
  PreemptionSchedule s(o, 0);
  std::vector<std::string> alive = {"a", "b", "c", "d"};
  std::vector<std::string> log;
  for (double t = 0; t <= until; t += 0.05) {
    for (const auto& a : s.due(t, alive)) {
      log.push_back(std::to_string(static_cast<int>(t * 20 + 0.5)) + ":" +
                    (a.kind == PreemptionAction::Kill ? "kill " : a.kind == PreemptionAction::Terminate ? "term " : "spawn") +
                    a.victim);
    }
  }
  return log;
}

TEST(PreemptionSchedule, TheSameSeedRepeatsTheSameScheduleAndAnotherDiffers) {
  PreemptionOptions o{2, 0, 1, 42};
  auto first = run(o, 30), second = run(o, 30);
  EXPECT_EQ(first, second);
  o.seed = 43;
  EXPECT_NE(run(o, 30), first);
}

TEST(PreemptionSchedule, EveryPeriodOneVictimAndItsRespawn) {
  PreemptionSchedule s({5, 0, 2, 1}, 100);
  EXPECT_TRUE(s.due(104.9, {"a"}).empty());
  auto at5 = s.due(105, {"a", "b"});
  ASSERT_EQ(at5.size(), 1u);
  EXPECT_EQ(at5[0].kind, PreemptionAction::Kill);
  EXPECT_TRUE(s.due(106.9, {"b"}).empty());
  auto at7 = s.due(107, {"b"});
  ASSERT_EQ(at7.size(), 1u);
  EXPECT_EQ(at7[0].kind, PreemptionAction::Respawn);
  EXPECT_EQ(s.preemptions(), 1);
}

TEST(PreemptionSchedule, NoticeSendsTerminateThenKill) {
  PreemptionSchedule s({5, 3, 0, 1}, 0);
  auto t5 = s.due(5, {"a"});
  ASSERT_EQ(t5.size(), 1u);
  EXPECT_EQ(t5[0].kind, PreemptionAction::Terminate);
  EXPECT_EQ(t5[0].victim, "a");
  EXPECT_TRUE(s.due(7.9, {"a"}).empty());
  auto t8 = s.due(8, {"a"});
  ASSERT_EQ(t8.size(), 1u);
  EXPECT_EQ(t8[0].kind, PreemptionAction::Kill);
  EXPECT_EQ(t8[0].victim, "a");
}

TEST(PreemptionSchedule, DisabledOrNobodyAliveDoesNothing) {
  PreemptionSchedule off({0, 0, 0, 1}, 0);
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.due(1e6, {"a"}).empty());
  PreemptionSchedule empty({1, 0, 0, 1}, 0);
  EXPECT_TRUE(empty.due(10, {}).empty());
  EXPECT_EQ(empty.preemptions(), 0);
}

}  // namespace
}  // namespace swarm::runtime
