// Job progress from the registry's replies (operator/controller/progress.h): pure, no I/O.
#include "operator/controller/progress.h"

#include <gtest/gtest.h>

namespace swarm::op {
namespace {

using nlohmann::json;

planner::PeerRecord worker(const std::string& id, int stage, std::int64_t step, double sps,
                           const std::string& state = "serving", std::int64_t queue = 0) {
  planner::PeerRecord r;
  r.peer_id = id;
  r.role = "worker";
  r.stage = stage;
  r.step = step;
  r.samples_per_second = sps;
  r.state = planner::parse_peer_state(state);
  r.queue_length = queue;
  return r;
}

TEST(ProgressTest, StepIsTheSlowestStagesMostAdvancedPeer) {
  const std::vector<planner::PeerRecord> w = {worker("a", 0, 7, 100), worker("b", 0, 6, 50), worker("c", 1, 5, 80),
                                              worker("d", 1, 4, 20, "serving", 3)};
  JobProgress p = merge_progress({}, w, {}, 2, 64, 100.0, 60);
  EXPECT_EQ(p.step, 5);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].step, 7);
  EXPECT_EQ(p.stages[1].step, 5);
  EXPECT_DOUBLE_EQ(p.stages[0].samples_per_second, 150);
  EXPECT_DOUBLE_EQ(p.stages[1].samples_per_second, 100);
  EXPECT_EQ(p.stages[1].queue_length, 3);
  EXPECT_EQ(p.stages[0].live_workers, 2);
  EXPECT_EQ(p.samples_per_second, 0);  // one reading spans no time
  EXPECT_EQ(p.step_changed_at, 100.0);
}

TEST(ProgressTest, JoiningWorkersAddNoCapacityAndStrangersAreIgnored) {
  planner::PeerRecord trainer;
  trainer.peer_id = "t";
  trainer.role = "trainer";
  trainer.step = 99;
  const std::vector<planner::PeerRecord> w = {worker("a", 0, 3, 100), worker("j", 0, 0, 40, "joining"),
                                              worker("b", 1, 3, 90), worker("x", 5, 50, 1000), trainer};
  JobProgress p = merge_progress({}, w, {}, 2, 64, 1.0, 60);
  EXPECT_DOUBLE_EQ(p.stages[0].samples_per_second, 100);
  EXPECT_EQ(p.stages[0].live_workers, 2);
  EXPECT_EQ(p.step, 3);
}

// A worker that announced "failed" (its stage came back with neither a live peer nor a
// checkpoint) is not serving: it neither counts as a live peer of its stage nor says what step
// the stage is at, nor adds capacity.
TEST(ProgressTest, AFailedWorkerIsNotLiveAndSaysNothingAboutTheStep) {
  const std::vector<planner::PeerRecord> w = {worker("a", 0, 9, 100), worker("f", 0, 0, 40, "failed"),
                                              worker("b", 1, 9, 90), worker("g", 1, 3, 30, "failed")};
  JobProgress p = merge_progress({}, w, {}, 2, 64, 1.0, 60);
  EXPECT_EQ(p.stages[0].live_workers, 1);
  EXPECT_EQ(p.stages[1].live_workers, 1);
  EXPECT_DOUBLE_EQ(p.stages[0].samples_per_second, 100);
  EXPECT_EQ(p.step, 9);
  // A stage whose only worker failed has no live worker: the job's step is the last one known.
  p = merge_progress(p, {worker("a", 0, 10, 100), worker("g", 1, 0, 30, "failed")}, {}, 2, 64, 2.0, 60);
  EXPECT_EQ(p.stages[1].live_workers, 0);
  EXPECT_EQ(p.step, 10);
}

TEST(ProgressTest, LossIsTheMeanOfTheTrainersAndKeptWhenNoneReports) {
  auto trainer = [](const std::string& id, double loss) {
    planner::PeerRecord t;
    t.peer_id = id;
    t.role = "trainer";
    t.loss = loss;
    return t;
  };
  const auto w = worker("a", 0, 3, 100), v = worker("b", 1, 3, 90);
  JobProgress p = merge_progress({}, {w, v, trainer("t0", 2.5), trainer("t1", 3.5)}, {}, 2, 64, 1, 60);
  EXPECT_DOUBLE_EQ(p.loss, 3.0);
  // A trainer that has no loss yet (0) does not pull the mean down.
  p = merge_progress(p, {w, v, trainer("t0", 2.4), trainer("t1", 0)}, {}, 2, 64, 2, 60);
  EXPECT_DOUBLE_EQ(p.loss, 2.4);
  // No trainer at all (training over): the last loss stays, in status too.
  p = merge_progress(p, {w, v}, {}, 2, 64, 3, 60);
  EXPECT_DOUBLE_EQ(p.loss, 2.4);
  SwarmJobStatus st;
  st.stages.resize(2);
  apply_progress(st, p, "");
  EXPECT_DOUBLE_EQ(st.loss, 2.4);
  // Never a loss reported: status.loss is left alone.
  SwarmJobStatus untouched;
  untouched.loss = 1.25;
  untouched.stages.resize(2);
  apply_progress(untouched, merge_progress({}, {w, v}, {}, 2, 64, 1, 60), "");
  EXPECT_DOUBLE_EQ(untouched.loss, 1.25);
}

TEST(ProgressTest, SamplesPerSecondIsTheStepAdvanceOverTheWindow) {
  JobProgress p;
  std::int64_t step = 0;
  for (double t = 0; t <= 100; t += 10) {
    p = merge_progress(p, {worker("a", 0, step, 1), worker("b", 1, step, 1)}, {}, 2, 32, t, 30);
    step += 2;  // 2 steps every 10 s = 0.2 steps/s = 6.4 samples/s at globalBatch 32
  }
  EXPECT_EQ(p.step, 20);
  EXPECT_DOUBLE_EQ(p.samples_per_second, 6.4);
  EXPECT_LE(p.window.back().first - p.window.front().first, 30.0 + 1e-9);
  EXPECT_GE(p.window.back().first - p.window.front().first, 30.0 - 1e-9);
  // Training stops: the rate falls to 0 once the window holds only the stalled readings.
  const double changed = p.step_changed_at;
  for (double t = 110; t <= 150; t += 10) p = merge_progress(p, {worker("a", 0, 20, 1), worker("b", 1, 20, 1)}, {}, 2, 32, t, 30);
  EXPECT_DOUBLE_EQ(p.samples_per_second, 0);
  EXPECT_EQ(p.step_changed_at, changed);
}

TEST(ProgressTest, AStageWithoutPeersKeepsTheLastStepAndAStepBackRestartsTheWindow) {
  JobProgress p = merge_progress({}, {worker("a", 0, 10, 1), worker("b", 1, 10, 1)}, {}, 2, 64, 0, 60);
  p = merge_progress(p, {worker("a", 0, 12, 1)}, {}, 2, 64, 10, 60);  // stage 1 has no live worker
  EXPECT_EQ(p.step, 12);  // the stages with peers say 12; an empty stage says nothing
  EXPECT_EQ(p.stages[1].live_workers, 0);
  p = merge_progress(p, {}, {}, 2, 64, 20, 60);  // registry restarted: nobody yet
  EXPECT_EQ(p.step, 12);
  EXPECT_EQ(p.window.size(), 2u);  // no point for a reading without workers
  // Restored from an older checkpoint: status shows the step the swarm is at, the rate restarts.
  p = merge_progress(p, {worker("a", 0, 5, 1), worker("b", 1, 5, 1)}, {}, 2, 64, 30, 60);
  EXPECT_EQ(p.step, 5);
  EXPECT_EQ(p.window.size(), 1u);
  EXPECT_EQ(p.samples_per_second, 0);
}

TEST(ProgressTest, ParsesStatsAndRefusesMalformedOnes) {
  RegistryStats s = parse_registry_stats(json::parse(
      R"({"rebalanceMoves": 3, "events": {"checkpoint_restores": 2, "handoffs": 5}, "assignments": {"w": 1}})"));
  EXPECT_EQ(s.rebalance_moves, 3);
  EXPECT_EQ(s.events.at("checkpoint_restores"), 2);
  EXPECT_EQ(s.events.at("handoffs"), 5);
  EXPECT_EQ(parse_registry_stats(json::object()).rebalance_moves, 0);  // an older registry: fields absent
  auto message = [](const char* text) {
    try {
      parse_registry_stats(json::parse(text));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"([1, 2])"), "stats: must be a JSON object, got [1,2]");
  EXPECT_EQ(message(R"({"rebalanceMoves": "3"})"), "rebalanceMoves: must be an integer, got \"3\"");
  EXPECT_EQ(message(R"({"rebalanceMoves": -1})"), "rebalanceMoves: must be >= 0, got -1");
  EXPECT_EQ(message(R"({"events": {"x": 1.5}})"), "events.x: must be an integer, got 1.5");
  EXPECT_EQ(message(R"({"events": []})"), "events: must be an object, got []");
}

TEST(ProgressTest, AppliesToStatusByStageIndex) {
  SwarmJobStatus status;
  status.stages.resize(2);
  status.stages[0].ready = 1;
  JobProgress p = merge_progress({}, {worker("a", 0, 4, 12.345), worker("b", 1, 3, 7, "serving", 2)},
                                 parse_registry_stats(json::parse(R"({"rebalanceMoves": 1, "events": {"handoffs": 2}})")),
                                 2, 64, 5, 60);
  apply_progress(status, p, "2026-11-29T18:00:00Z");
  EXPECT_EQ(status.step, 3);
  EXPECT_EQ(status.stages[0].ready, 1);  // pod counts are the reconcile's, untouched
  EXPECT_EQ(status.stages[0].step, 4);
  EXPECT_DOUBLE_EQ(status.stages[0].samples_per_second, 12.35);  // rounded to 0.01
  EXPECT_EQ(status.stages[1].queue_length, 2);
  EXPECT_EQ(status.stages[1].peers, 1);
  EXPECT_EQ(status.rebalance_moves, 1);
  EXPECT_EQ(status.swarm_events.at("handoffs"), 2);
  EXPECT_EQ(status.last_step_time, "2026-11-29T18:00:00Z");
  // Round trip through the JSON the API server stores.
  const SwarmJobStatus back = status_from_json(to_json(status));
  EXPECT_EQ(back.stages[1].step, 3);
  EXPECT_EQ(back.stages[0].peers, 1);
  EXPECT_EQ(back.swarm_events.at("handoffs"), 2);
  EXPECT_EQ(back.last_step_time, "2026-11-29T18:00:00Z");
  EXPECT_EQ(back.rebalance_moves, 1);
}

TEST(ProgressTest, RegistryUrlFromAnnotationOrTemplate) {
  json job = {{"metadata", {{"name", "lm"}, {"namespace", "team-a"}}}};
  EXPECT_EQ(registry_url_for(job, kDefaultRegistryUrlTemplate), "http://lm-registry.team-a.svc:7400");
  EXPECT_EQ(registry_url_for(job, "http://{job}.{namespace}.example:80/{job}"), "http://lm.team-a.example:80/lm");
  job["metadata"]["annotations"] = {{kAnnotationRegistryUrl, "http://127.0.0.1:9"}};
  EXPECT_EQ(registry_url_for(job, kDefaultRegistryUrlTemplate), "http://127.0.0.1:9");
}

TEST(ProgressTest, ARegistryFailureTurnsTheJobFailedAndIsParsedStrictly) {
  RegistryStats s = parse_registry_stats(json::parse(
      R"({"rebalanceMoves": 0, "failure": {"reason": "StageReset", "stage": 1, "step": 42, "message": "stage 1 lost its last peer and has no checkpoint"}})"));
  ASSERT_TRUE(s.failure);
  EXPECT_EQ(s.failure->reason, "StageReset");
  EXPECT_EQ(s.failure->stage, 1);
  EXPECT_EQ(s.failure->step, 42);
  EXPECT_FALSE(parse_registry_stats(json::parse(R"({"failure": null})")).failure);  // healthy
  EXPECT_FALSE(parse_registry_stats(json::object()).failure);
  for (const char* text : {R"({"failure": "StageReset"})", R"({"failure": {"stage": 1}})",
                           R"({"failure": {"reason": "StageReset", "step": -1}})",
                           R"({"failure": {"reason": "StageReset", "message": 7}})"}) {
    try {
      parse_registry_stats(json::parse(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("failure"), std::string::npos) << e.what();
    }
  }

  SwarmJobStatus status;
  status.phase = "Running";
  EXPECT_FALSE(apply_failure(status, std::nullopt, 3, "2026-01-01T00:00:00Z"));
  EXPECT_EQ(status.phase, "Running");
  EXPECT_EQ(find_condition(status.conditions, "Failed"), nullptr);  // no condition until there is news
  EXPECT_TRUE(apply_failure(status, s.failure, 3, "2026-01-01T00:00:01Z"));
  EXPECT_EQ(status.phase, "Failed");
  const Condition* c = find_condition(status.conditions, "Failed");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->reason, "StageReset");
  EXPECT_NE(c->message.find("stage 1 at step 42"), std::string::npos) << c->message;
  EXPECT_NE(c->message.find("no checkpoint"), std::string::npos) << c->message;
  EXPECT_FALSE(apply_failure(status, s.failure, 3, "2026-01-01T00:00:02Z")) << "turned Failed once, not per reading";
  EXPECT_FALSE(apply_failure(status, std::nullopt, 3, "2026-01-01T00:00:03Z"));
  EXPECT_EQ(find_condition(status.conditions, "Failed")->status, "False");
}

}  // namespace
}  // namespace swarm::op
