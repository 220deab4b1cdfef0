// A peer's region in the registry: carried by its announce, shown in the peer listing, optional on
// the wire both ways (a region-less record's JSON is what it was before regions), bad values refused
// naming the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "registry/registry_service.h"
#include "registry/wire.h"

namespace swarm::registry {
namespace {

using nlohmann::json;

class RegionTest : public ::testing::Test {
 protected:
  RegionTest() : svc_(RegistryOptions{2.0, [this] { return now_; }}) {}
  HttpReply put(const std::string& id, const std::string& body) {
    return svc_.handle("PUT", "/v1/peers/" + id, "", body);
  }
  json listing(const std::string& query = "") {
    return json::parse(svc_.handle("GET", "/v1/peers", query, "").body);
  }
  double now_ = 100;
  RegistryService svc_;
};

TEST_F(RegionTest, TheRegionAPeerAnnouncesIsListed) {
  ASSERT_EQ(put("w-a", R"({"role":"worker","stage":0,"host":"h","port":9,"region":"eu-west-1"})").status, 200);
  ASSERT_EQ(put("w-x", R"({"role":"worker","stage":0,"host":"h","port":9})").status, 200);
  ASSERT_EQ(put("t-b", R"({"role":"trainer","host":"h","region":"us_east.2"})").status, 200);
  const json all = listing()["peers"];
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["peerId"], "t-b");
  EXPECT_EQ(all[0]["region"], "us_east.2");
  EXPECT_EQ(all[1]["region"], "eu-west-1");
  EXPECT_FALSE(all[2].contains("region")) << all[2].dump();  // none given: none listed
  EXPECT_EQ(listing("role=worker&stage=0")["peers"][0]["region"], "eu-west-1");
  // A heartbeat without the field puts the peer back in region "".
  ASSERT_EQ(put("w-a", R"({"role":"worker","stage":0,"host":"h","port":9})").status, 200);
  EXPECT_FALSE(listing("role=worker&stage=0")["peers"][0].contains("region"));
}

TEST_F(RegionTest, ABadRegionIsRefusedNamingTheField) {
  const std::string head = R"({"role":"worker","stage":0,"host":"h","port":9,"region":)";
  const std::vector<std::string> bads = {R"("eu west")", R"("a/b")", "7", "\"" + std::string(64, 'r') + "\""};
  for (const std::string& bad : bads) {
    HttpReply r = put("w", head + bad + "}");
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.body.find("region: "), 10u) << r.body;  // {"error":"region: ...
  }
  EXPECT_EQ(json::parse(put("w", head + "7}").body)["error"], "region: must be a string, got 7");
  EXPECT_EQ(json::parse(put("w", head + R"("eu west"})").body)["error"],
            "region: must be at most 63 characters of [A-Za-z0-9._-], got \"eu west\"");
  EXPECT_TRUE(listing()["peers"].empty());
}

TEST(WireRegion, RoundTripsAndIsLeftOutWhenEmpty) {
  planner::PeerRecord rec;
  rec.peer_id = "w";
  rec.role = "worker";
  rec.stage = 1;
  rec.host = "h";
  rec.port = 9;
  EXPECT_FALSE(wire::to_json(rec).contains("region"));
  EXPECT_EQ(wire::peer_from_json(wire::to_json(rec)).region, "");
  rec.region = "b";
  EXPECT_EQ(wire::to_json(rec)["region"], "b");
  EXPECT_EQ(wire::peer_from_json(wire::to_json(rec)).region, "b");
  EXPECT_TRUE(wire::valid_region(""));
  EXPECT_TRUE(wire::valid_region(std::string(63, 'a')));
  EXPECT_FALSE(wire::valid_region(std::string(64, 'a')));
  EXPECT_FALSE(wire::valid_region("a b"));
}

}  // namespace
}  // namespace swarm::registry
