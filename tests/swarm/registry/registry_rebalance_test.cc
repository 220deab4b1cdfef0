// The registry runs the rebalancing planner on heartbeats and hands a move to the moved worker;
// peers report events that the run's summary reads back from /v1/stats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "worker/swarm/registry/registry_service.h"

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
    for (auto& [id, stage] : stages_) {
      json r = heartbeat(id, stage, 10);
      if (r.contains("assignedStage")) out[id] = r["assignedStage"].get<int>();
    }
    return out;
  }

  double now_ = 1000;
  RegistryService svc_;
  std::map<std::string, int> stages_{{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}, {"e", 1}, {"f", 2}};
};

TEST_F(RebalancingRegistry, NoMoveDuringTheStartUpPeriod) {
  heartbeat("a", 0, 10);  // stages 1 and 2 look empty: their workers are still starting
  heartbeat("b", 0, 10);
  EXPECT_TRUE(round_of_heartbeats().empty());
}

TEST_F(RebalancingRegistry, ImbalancedSwarmGetsOneMoveAtATimeUntilBalanced) {
  round_of_heartbeats();
  int moves = 0;
  for (int period = 0; period < 12; ++period) {
    now_ += 31;  // past the period and the cooldown
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

}  // namespace
}  // namespace swarm::registry
