// The summary's step invariant (worker/local/step_invariant.h): every stage's step is the
// trainers' count of global batches, or differs by samples a fault accounts for; and it comes out
// bad for the two ways issue 29 saw steps drift (a stage admitting more than its global batch,
// a stage closing steps it did not fill).
#include <gtest/gtest.h>

#include "worker/local/step_invariant.h"

namespace swarm::runtime {
namespace {

using nlohmann::json;

StepInvariantInput input(json stage_steps, json open, json events, int64_t completed, int64_t lost = 0) {
  StepInvariantInput in;
  in.stats = {{"stageSteps", stage_steps}, {"stageOpenSamples", open}, {"events", events}};
  in.report = {{"samples", completed}, {"microbatches_lost", lost}};
  in.global_batch = 32;
  in.microbatch = 4;
  return in;
}

TEST(StepInvariant, WithoutFaultsEveryStageIsAtTheTrainersGlobalBatches) {
  // 60 steps of 32 and 12 samples of the next: 1932 samples completed.
  const json r = step_invariant(input({{"0", 60}, {"1", 60}}, {{"0", 12}, {"1", 12}}, json::object(), 1932));
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["completed_global_batches"], 60);
  EXPECT_EQ(r["stages"]["0"]["extra_samples"], 0);
  EXPECT_EQ(r["stages"]["1"]["extra_samples"], 0);
  EXPECT_EQ(r["accounted_samples"]["total"], 0);
  EXPECT_EQ(stage_step_spread(input({{"0", 60}, {"1", 60}}, {}, {}, 0).stats)["stage_step_spread"], 0);
}

// Issue 29: two peers each admitting against the other's count of 25 ms ago averaged 36-52
// samples per step of 32; that stage ends behind the trainers' count, with nothing to account.
TEST(StepInvariant, AStageThatAdmittedMoreThanItsGlobalBatchIsBad) {
  const json r = step_invariant(input({{"0", 55}, {"1", 60}}, {{"0", 0}, {"1", 12}}, json::object(), 1932));
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["stages"]["0"]["extra_samples"], 55 * 32 - 1932);
  EXPECT_EQ(stage_step_spread(input({{"0", 55}, {"1", 60}}, {}, {}, 0).stats)["stage_step_spread"], 5);
}

// Issue 29: while every peer of one stage was gone, another stage's step kept rising.
TEST(StepInvariant, AStageThatClosedStepsItDidNotFillIsBad) {
  const json r = step_invariant(input({{"0", 70}, {"1", 60}}, {{"0", 0}, {"1", 12}}, json::object(), 1932));
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["stages"]["0"]["extra_samples"], 70 * 32 - 1932);
}

TEST(StepInvariant, FaultsAccountForWhatAStageAdmittedTwice) {
  // Stage 0 admitted 8 samples twice (retries that took a fresh claim) and lost a microbatch
  // after admitting it: 12 extra, one step ahead of the trainers' count with 8 + 4 accounted.
  json events{{"samples_readmitted", 8}};
  json r = step_invariant(input({{"0", 61}, {"1", 60}}, {{"0", 0}, {"1", 20}}, events, 1940, 1));
  EXPECT_EQ(r["stages"]["0"]["extra_samples"], 12);
  EXPECT_EQ(r["stages"]["1"]["extra_samples"], 0);
  EXPECT_EQ(r["accounted_samples"]["total"], 12);
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  // The same difference with nothing counted is bad.
  r = step_invariant(input({{"0", 61}, {"1", 60}}, {{"0", 0}, {"1", 20}}, json::object(), 1940));
  EXPECT_FALSE(r["ok"].get<bool>());
  // A stage restored from an older checkpoint takes up the swarm's step number: each number it
  // skipped holds no claim, and is counted (checkpoint_steps_lost).
  events = {{"checkpoint_steps_lost", 3}};
  r = step_invariant(input({{"0", 63}, {"1", 60}}, {{"0", 0}, {"1", 12}}, events, 1932));
  EXPECT_EQ(r["accounted_samples"]["step_numbers_skipped"], 96);
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
}

TEST(StepInvariant, AHandOffThatMayNeverHaveBeenTakenMayTakeSamplesAway) {
  json events{{"handoff_samples_unconfirmed", 8}};
  json r = step_invariant(input({{"0", 60}}, {{"0", 4}}, events, 1932));
  EXPECT_EQ(r["stages"]["0"]["extra_samples"], -8);
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  r = step_invariant(input({{"0", 60}}, {{"0", 4}}, json::object(), 1932));
  EXPECT_FALSE(r["ok"].get<bool>());
}

// The upper bound alone (none_over) and the shortfall beyond it (short_samples): a stage 8 under
// the trainers' count is short, not over; one 8 over is over.
TEST(StepInvariant, AStageUnderTheCountIsShortNotOver) {
  json r = step_invariant(input({{"0", 60}, {"1", 60}}, {{"0", 12}, {"1", 4}}, json::object(), 1932));
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_TRUE(r["none_over"].get<bool>()) << r.dump();
  EXPECT_EQ(r["short_samples"], 8);
  r = step_invariant(input({{"0", 60}, {"1", 60}}, {{"0", 12}, {"1", 20}}, json::object(), 1932));
  EXPECT_FALSE(r["none_over"].get<bool>()) << r.dump();
  EXPECT_EQ(r["short_samples"], 0);
  r = step_invariant(input({{"0", 60}, {"1", 60}}, {{"0", 12}, {"1", 12}}, json::object(), 1932));
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_TRUE(r["none_over"].get<bool>());
  EXPECT_EQ(r["short_samples"], 0);
}

TEST(StepInvariant, StatsWithoutStageStepsSayNothing) {
  EXPECT_TRUE(step_invariant(StepInvariantInput{}).is_null());
  EXPECT_TRUE(stage_step_spread(nullptr).empty());
}

TEST(StepInvariant, ReadWhileTheJobTrainsTheTrainersMicrobatchesInFlightAreAllowedNoMore) {
  // Stage 1 admitted two microbatches (8 samples) whose backward has not reached stage 0 yet.
  StepInvariantInput in = input({{"0", 60}, {"1", 60}}, {{"0", 12}, {"1", 20}}, json::object(), 1932);
  EXPECT_FALSE(step_invariant(in)["ok"].get<bool>());
  in.in_flight_samples = 8;
  json r = step_invariant(in);
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["accounted_samples"]["in_flight_samples"], 8);
  // A stage that closed a step it did not fill is more than the trainers can have in flight.
  in = input({{"0", 61}, {"1", 60}}, {{"0", 0}, {"1", 12}}, json::object(), 1932);
  in.in_flight_samples = 16;
  EXPECT_FALSE(step_invariant(in)["ok"].get<bool>());
}

TEST(StepInvariant, TheTrainersCountsComeFromTheirMetricsSummedOverTrainers) {
  const std::string a =
      "# HELP swarm_trainer_samples_completed_total On a trainer\n"
      "# TYPE swarm_trainer_samples_completed_total counter\n"
      "swarm_trainer_samples_completed_total{peer=\"t0\",role=\"trainer\"} 1200\n"
      "swarm_trainer_microbatches_lost_total{peer=\"t0\",role=\"trainer\"} 2\n"
      "swarm_trainer_samples_completed_total_other 5\n";
  const std::string b =
      "swarm_trainer_samples_completed_total{peer=\"t1\",role=\"trainer\"} 7.32e+02\n"
      "swarm_trainer_microbatches_lost_total{peer=\"t1\",role=\"trainer\"} 0\n";
  const json c = trainer_counts({a, b});
  EXPECT_EQ(c["samples"], 1932);
  EXPECT_EQ(c["microbatches_lost"], 2);
  EXPECT_EQ(trainer_counts({})["samples"], 0);
}

TEST(StepInvariant, MetricsThatAreNotATrainersAreRefusedByName) {
  try {
    trainer_counts({"swarm_samples_processed_total{stage=\"0\"} 5\n"});
    FAIL() << "a worker's metrics were taken for a trainer's";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("swarm_trainer_samples_completed_total"), std::string::npos) << e.what();
  }
  try {
    trainer_counts({"swarm_trainer_samples_completed_total 12\nswarm_trainer_microbatches_lost_total -1\n"});
    FAIL() << "a negative count was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("swarm_trainer_microbatches_lost_total is -1"), std::string::npos) << e.what();
  }
  try {
    trainer_counts({"swarm_trainer_samples_completed_total 12abc\nswarm_trainer_microbatches_lost_total 0\n"});
    FAIL() << "a count that is not a number was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no number"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace swarm::runtime
