// PeerListing (the ready-made text of GET /v1/peers) and the listing RegistryService serves from
// it: byte for byte what serializing the live records gives, and changed by every join, leave,
// expiry and record change.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/peer_table.h"
#include "registry/peer_listing.h"
#include "registry/registry_service.h"
#include "registry/wire.h"

namespace swarm::registry {
namespace {

using nlohmann::json;

planner::PeerRecord record(const std::string& id, const std::string& role, int stage, const std::string& state) {
  planner::PeerRecord r;
  r.peer_id = id;
  r.role = role;
  r.stage = stage;
  r.host = "10.0.0." + std::to_string(id.size());
  r.port = 7000 + stage;
  r.metrics_port = 9100;
  r.state = planner::parse_peer_state(state);
  r.step = 41;
  r.queue_length = 3;
  r.samples_per_second = 12.625;
  r.loss = 0.1;
  return r;
}

// What RegistryService replied before PeerListing: the live records serialized one by one.
std::string reference(const planner::PeerTable& table, const std::string& role, int stage, double now,
                      double unix_now) {
  json list = json::array();
  for (planner::PeerRecord rec : table.live(now, role, stage)) {
    rec.last_seen = unix_now - (now - rec.last_seen);
    list.push_back(wire::to_json(rec));
  }
  return json{{"peers", list}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(PeerListing, RendersExactlyWhatSerializingTheLiveRecordsGives) {
  planner::PeerTable table(10);  // every record live at `now`, as after PeerTable::expire(now)
  PeerListing listing;
  auto put = [&](const planner::PeerRecord& r, double now) {
    listing.put(r, now);
    table.upsert(r, now);
  };
  put(record("w-b", "worker", 1, "serving"), 100.25);
  put(record("w-a", "worker", 1, "joining"), 101.5);
  put(record("w-c", "worker", 0, "averaging"), 102);
  put(record("t-0", "trainer", -1, "serving"), 103.125);
  // Text a record may carry: quotes, escapes, the key's own text, non-ASCII, invalid UTF-8 (in
  // its host: the state is an enum, its text always one of the wire's names).
  planner::PeerRecord odd = record("w-d", "worker", 1, "serving");
  odd.host = R"(odd "lastSeen":0, \ é)" + std::string("\xff");
  put(odd, 104);
  put(record("w-a", "worker", 0, "serving"), 105);  // moves to stage 0
  const double now = 106, unix_now = 1.7e9 + 0.123456789;
  for (const std::string role : {"", "worker", "trainer"})
    for (int stage : {-1, 0, 1, 2})
      EXPECT_EQ(listing.render(role, stage, now, unix_now), reference(table, role, stage, now, unix_now))
          << "role=" << role << " stage=" << stage;
  EXPECT_EQ(listing.render("worker", 1, now, unix_now).find("\"w-a\""), std::string::npos);
  listing.erase("w-b");
  table.remove("w-b");
  listing.erase("nobody");
  EXPECT_EQ(listing.render("worker", 1, now, unix_now), reference(table, "worker", 1, now, unix_now));
  EXPECT_EQ(listing.size(), table.size());
  EXPECT_EQ(listing.render("worker", 7, now, unix_now), R"({"peers":[]})");
}

class ListingTest : public ::testing::Test {
 protected:
  ListingTest() : svc_(RegistryOptions{2.0, [this] { return now_; }}) {}

  // The stage's worker listing, lastSeen left out (it is the time of the read).
  json stage_list(int stage) {
    HttpReply r = svc_.handle("GET", "/v1/peers", "role=worker&stage=" + std::to_string(stage), "");
    EXPECT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    for (json& p : j["peers"]) p.erase("lastSeen");
    return j["peers"];
  }
  void announce(const std::string& id, int stage, const std::string& state, double samples_per_second = 0) {
    json body{{"role", "worker"},         {"stage", stage}, {"host", "10.0.0.1"},
              {"port", 7000},             {"state", state}, {"samplesPerSecond", samples_per_second}};
    HttpReply r = svc_.handle("PUT", "/v1/peers/" + id, "", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
  }
  static std::vector<std::string> ids(const json& list) {
    std::vector<std::string> out;
    for (const json& p : list) out.push_back(p["peerId"]);
    return out;
  }

  double now_ = 100;
  RegistryService svc_;
};

TEST_F(ListingTest, TheStageListingChangesWhenAPeerJoinsLeavesOrChanges) {
  using V = std::vector<std::string>;
  announce("a", 1, "serving");
  announce("b", 1, "joining");
  EXPECT_EQ(ids(stage_list(1)), (V{"a", "b"}));
  EXPECT_EQ(stage_list(1)[1]["state"], "joining");

  announce("b", 1, "serving", 40.5);  // state and throughput change
  EXPECT_EQ(stage_list(1)[1]["state"], "serving");
  EXPECT_EQ(stage_list(1)[1]["samplesPerSecond"], 40.5);

  announce("c", 1, "serving");  // joins
  EXPECT_EQ(ids(stage_list(1)), (V{"a", "b", "c"}));
  announce("d", 2, "serving");  // joins another stage
  EXPECT_EQ(ids(stage_list(1)), (V{"a", "b", "c"}));
  EXPECT_EQ(ids(stage_list(2)), (V{"d"}));

  announce("a", 2, "joining");  // moves to stage 2
  EXPECT_EQ(ids(stage_list(1)), (V{"b", "c"}));
  EXPECT_EQ(ids(stage_list(2)), (V{"a", "d"}));

  HttpReply r = svc_.handle("DELETE", "/v1/peers/c", "settled=true", "");  // leaves
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ids(stage_list(1)), (V{"b"}));

  now_ += 1.5;
  announce("d", 2, "draining");
  now_ += 1;  // b and a expire, d does not
  EXPECT_TRUE(stage_list(1).empty());
  EXPECT_EQ(ids(stage_list(2)), (V{"d"}));
  EXPECT_EQ(stage_list(2)[0]["state"], "draining");

  announce("b", 1, "joining");  // comes back
  EXPECT_EQ(ids(stage_list(1)), (V{"b"}));
}

}  // namespace
}  // namespace swarm::registry
