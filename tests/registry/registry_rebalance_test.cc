// The registry runs the rebalancing planner on heartbeats and hands a move to the moved worker;
// peers report events that the run's summary reads back from /v1/stats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "registry/registry_service.h"

namespace swarm::registry {
namespace {

using nlohmann::json;

class RebalancingRegistry : public ::testing::Test {
 protected:
  static RegistryOptions options(double* now) {
    RegistryOptions o;
    o.peer_expiry_seconds = 5;
    o.clock = [now] { return *now; };
    o.num_stages = 3;
    planner::RebalanceOptions ro;
    ro.period_seconds = 10;
    ro.cooldown_seconds = 30;
    o.rebalance = ro;
    return o;
  }
  RebalancingRegistry() : svc_(options(&now_)) {}

  void trainer_heartbeat() {
    json body{{"role", "trainer"}, {"host", "127.0.0.1"}, {"port", 0}, {"state", "serving"}};
    ASSERT_EQ(svc_.handle("PUT", "/v1/peers/trainer0", "", body.dump()).status, 200);
  }

  json heartbeat(const std::string& id, int stage, double rate, const std::string& state = "serving") {
    json body{{"role", "worker"}, {"stage", stage}, {"host", "127.0.0.1"}, {"port", 7000},
              {"state", state}, {"samplesPerSecond", rate}, {"queueLength", 0}};
    HttpReply r = svc_.handle("PUT", "/v1/peers/" + id, "", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  // One heartbeat from each worker; returns the assignments handed out.
  std::map<std::string, int> round_of_heartbeats() {
    std::map<std::string, int> out;
    if (with_trainer_) trainer_heartbeat();
    for (auto& [id, stage] : stages_) {
      json r = heartbeat(id, stage, 10);
      if (r.contains("assignedStage")) out[id] = r["assignedStage"].get<int>();
    }
    return out;
  }

  double now_ = 1000;
  bool with_trainer_ = true;  // a live trainer: there is work to balance
  RegistryService svc_;
  std::map<std::string, int> stages_{{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}, {"e", 1}, {"f", 2}};
};

TEST_F(RebalancingRegistry, NoMoveDuringTheStartUpPeriodUntilTheSwarmIsSettled) {
  trainer_heartbeat();  // work to balance: only the start-up rule holds moves back
  // Stages 1 and 2 look empty: their workers are still starting.
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(heartbeat("a", 0, 10).contains("assignedStage"));
    EXPECT_FALSE(heartbeat("b", 0, 10).contains("assignedStage"));
  }
  // Every stage has a worker, but two capacities are not measured yet (0), or a peer is joining.
  for (auto& [id, stage] : stages_) {
    EXPECT_FALSE(heartbeat(id, stage, id == "e" || id == "f" ? 0 : 10).contains("assignedStage"));
  }
  for (auto& [id, stage] : stages_) {
    EXPECT_FALSE(heartbeat(id, stage, 10, id == "f" ? "joining" : "serving").contains("assignedStage"));
  }
  HttpReply stats = svc_.handle("GET", "/v1/stats", "", "");
  EXPECT_EQ(json::parse(stats.body)["rebalanceMoves"], 0);
}

TEST_F(RebalancingRegistry, NothingMovesWithoutALiveTrainer) {
  with_trainer_ = false;
  now_ += 100;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(round_of_heartbeats().empty());
  with_trainer_ = true;
  auto assigned = round_of_heartbeats();
  auto second = round_of_heartbeats();
  assigned.insert(second.begin(), second.end());
  EXPECT_EQ(assigned.size(), 1u);
}

TEST_F(RebalancingRegistry, SettledSwarmIsRebalancedBeforeTheStartUpPeriodEnds) {
  now_ += 2;  // well inside the first period (10 s)
  std::map<std::string, int> assigned = round_of_heartbeats();
  auto second = round_of_heartbeats();
  assigned.insert(second.begin(), second.end());
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(stages_[assigned.begin()->first], 0);
  EXPECT_EQ(assigned.begin()->second, 1);
}

TEST_F(RebalancingRegistry, ImbalancedSwarmGetsOneMoveAtATimeUntilBalanced) {
  int moves = 0;
  for (int period = 0; period < 12; ++period) {
    // The first sweep settles the swarm (every stage served and measured), so the first move
    // comes at once; later sweeps come past the period and the cooldown.
    if (period > 0) now_ += 31;
    // The planner runs on whichever heartbeat comes first; the moved worker learns of it on its
    // own next heartbeat, so two sweeps deliver it.
    auto assigned = round_of_heartbeats();
    auto second = round_of_heartbeats();
    assigned.insert(second.begin(), second.end());
    ASSERT_LE(assigned.size(), 1u) << "one move in flight at a time";
    for (auto& [id, to] : assigned) {
      EXPECT_EQ(stages_[id], 0) << "moves leave the overloaded stage";
      stages_[id] = to;  // the worker moves and announces its new stage
      ++moves;
    }
    // Once it announced the new stage, the assignment is done, and no new one comes before the
    // period has passed.
    auto again = round_of_heartbeats();
    EXPECT_TRUE(again.empty()) << again.begin()->first << " -> " << again.begin()->second;
  }
  std::map<int, int> per_stage;
  for (auto& [id, s] : stages_) per_stage[s]++;
  EXPECT_EQ(per_stage, (std::map<int, int>{{0, 2}, {1, 2}, {2, 2}}));
  EXPECT_EQ(moves, 2);
  HttpReply stats = svc_.handle("GET", "/v1/stats", "", "");
  EXPECT_EQ(json::parse(stats.body)["rebalanceMoves"], 2);
}

TEST_F(RebalancingRegistry, EventsAreCountedAndBadEventsRefused) {
  EXPECT_EQ(svc_.handle("POST", "/v1/events", "", R"({"kind":"checkpoint_restores","count":1})").status, 200);
  EXPECT_EQ(svc_.handle("POST", "/v1/events", "", R"({"kind":"checkpoint_restores","count":2})").status, 200);
  HttpReply bad = svc_.handle("POST", "/v1/events", "", R"({"kind":"","count":1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("kind"), std::string::npos);
  HttpReply neg = svc_.handle("POST", "/v1/events", "", R"({"kind":"x","count":-3})");
  EXPECT_EQ(neg.status, 400);
  HttpReply stats = svc_.handle("GET", "/v1/stats", "", "");
  EXPECT_EQ(json::parse(stats.body)["events"]["checkpoint_restores"], 3);
}

// A worker that dies holds a gradient nobody averaged: when it is withdrawn by someone else
// (no settled=true) or its record expires, what it reported for the open step counts as lost.
TEST_F(RebalancingRegistry, DeadWorkersUnaveragedSamplesCountAsLost) {
  auto progress = [&](const std::string& id, int stage, int64_t step, int64_t samples) {
    json body{{"peerId", id}, {"samples", samples}, {"target", 64}};
    HttpReply r = svc_.handle("POST", "/v1/stages/" + std::to_string(stage) + "/steps/" +
                                          std::to_string(step) + "/progress", "", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  };
  auto events = [&] { return json::parse(svc_.handle("GET", "/v1/stats", "", "").body)["events"]; };
  round_of_heartbeats();
  progress("a", 0, 7, 12);
  progress("b", 0, 7, 8);
  progress("e", 1, 7, 20);
  progress("f", 2, 7, 4);
  // a: killed and withdrawn by the launcher.
  EXPECT_EQ(svc_.handle("DELETE", "/v1/peers/a", "", "").status, 200);
  EXPECT_EQ(events()["samples_lost"], 12);
  EXPECT_EQ(events()["peers_lost"], 1);
  // b: leaves by itself after handing its gradient off (it cleared its report first).
  progress("b", 0, 7, 0);
  EXPECT_EQ(svc_.handle("DELETE", "/v1/peers/b", "settled=true", "").status, 200);
  // e: leaves by itself; settled=true means it counted what it had.
  EXPECT_EQ(svc_.handle("DELETE", "/v1/peers/e", "settled=true", "").status, 200);
  EXPECT_EQ(events()["samples_lost"], 12);
  EXPECT_EQ(events()["peers_lost"], 1);
  // f: stops heartbeating and expires (5 s); the next request notices.
  now_ += 3;
  heartbeat("c", 0, 10);
  heartbeat("d", 0, 10);
  now_ += 3;
  heartbeat("c", 0, 10);
  EXPECT_EQ(events()["samples_lost"], 16);
  EXPECT_EQ(events()["peers_lost"], 2);
  // Withdrawing a peer that is already gone counts nothing more.
  EXPECT_EQ(svc_.handle("DELETE", "/v1/peers/a", "", "").status, 200);
  EXPECT_EQ(events()["samples_lost"], 16);
  // Progress with admitted work; admitted below samples is refused, naming the field.
  HttpReply ok = svc_.handle("POST", "/v1/stages/0/steps/8/progress", "",
                             R"({"peerId":"c","samples":4,"target":64,"admitted":20})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["samplesTotal"], 20);
  HttpReply low = svc_.handle("POST", "/v1/stages/0/steps/8/progress", "",
                              R"({"peerId":"c","samples":4,"target":64,"admitted":2})");
  EXPECT_EQ(low.status, 400);
  EXPECT_NE(low.body.find("admitted"), std::string::npos) << low.body;
  // A bad flag is refused with the parameter named.
  HttpReply bad = svc_.handle("DELETE", "/v1/peers/c", "settled=maybe", "");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("settled"), std::string::npos) << bad.body;
  EXPECT_NE(bad.body.find("maybe"), std::string::npos) << bad.body;
}

}  // namespace
}  // namespace swarm::registry
