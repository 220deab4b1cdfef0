#include "planner/peer_table.h"

#include <gtest/gtest.h>

namespace swarm::planner {
namespace {

PeerRecord worker(const std::string& id, int stage) {
  PeerRecord r;
  r.peer_id = id;
  r.role = "worker";
  r.stage = stage;
  r.host = "10.0.0.1";
  r.port = 7000;
  r.state = PeerState::Serving;
  return r;
}

PeerRecord trainer(const std::string& id) {
  PeerRecord r;
  r.peer_id = id;
  r.role = "trainer";
  r.host = "10.0.0.2";
  r.state = PeerState::Serving;
  return r;
}

std::vector<std::string> ids(const std::vector<PeerRecord>& v) {
  std::vector<std::string> out;
  for (const auto& r : v) out.push_back(r.peer_id);
  return out;
}

TEST(PeerTable, UpsertStampsLastSeenAndReplaces) {
  PeerTable t(10);
  PeerRecord r = worker("w1", 0);
  r.last_seen = 999;  // ignored: the table stamps its own clock
  t.upsert(r, 5.0);
  auto found = t.find("w1", 5.0);
  ASSERT_TRUE(found.has_value());
  EXPECT_DOUBLE_EQ(found->last_seen, 5.0);

  r.queue_length = 7;
  r.stage = 1;
  t.upsert(r, 6.0);
  EXPECT_EQ(t.size(), 1u);
  found = t.find("w1", 6.0);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->queue_length, 7);
  EXPECT_EQ(found->stage, 1);
  EXPECT_DOUBLE_EQ(found->last_seen, 6.0);
}

TEST(PeerTable, LiveIsSortedAndFiltered) {
  PeerTable t(10);
  t.upsert(worker("w3", 1), 0);
  t.upsert(worker("w1", 0), 0);
  t.upsert(trainer("t1"), 0);
  t.upsert(worker("w2", 1), 0);

  EXPECT_EQ(ids(t.live(1)), (std::vector<std::string>{"t1", "w1", "w2", "w3"}));
  EXPECT_EQ(ids(t.live(1, "worker")), (std::vector<std::string>{"w1", "w2", "w3"}));
  EXPECT_EQ(ids(t.live(1, "worker", 1)), (std::vector<std::string>{"w2", "w3"}));
  EXPECT_EQ(ids(t.live(1, "", 0)), (std::vector<std::string>{"w1"}));
  EXPECT_EQ(ids(t.live(1, "trainer")), (std::vector<std::string>{"t1"}));
  EXPECT_TRUE(t.live(1, "worker", 7).empty());
  EXPECT_TRUE(t.live(1, "nobody").empty());
}

TEST(PeerTable, RecordsExpireUnlessRefreshed) {
  PeerTable t(2.0);
  t.upsert(worker("a", 0), 0);
  t.upsert(worker("b", 0), 0);
  EXPECT_TRUE(t.is_live("a", 2.0));  // exactly at the edge: still live
  t.upsert(worker("b", 0), 1.5);     // heartbeat
  EXPECT_FALSE(t.is_live("a", 2.5));
  EXPECT_TRUE(t.is_live("b", 2.5));
  EXPECT_FALSE(t.find("a", 2.5).has_value());
  EXPECT_EQ(ids(t.live(2.5)), (std::vector<std::string>{"b"}));

  // Expired records linger until expire() drops them; a heartbeat before that revives them.
  EXPECT_EQ(t.size(), 2u);
  t.expire(2.5);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_FALSE(t.is_live("a", 2.5));
  t.expire(10);
  EXPECT_EQ(t.size(), 0u);
}

TEST(PeerTable, ExpireReturnsTheDroppedRecordsAndStoredSeesThemUntilThen) {
  PeerTable t(5);
  PeerRecord a, b;
  a.peer_id = "a";
  a.stage = 2;
  b.peer_id = "b";
  t.upsert(a, 0);
  t.upsert(b, 4);
  EXPECT_FALSE(t.find("a", 6).has_value());  // not live any more...
  ASSERT_TRUE(t.stored("a").has_value());    // ...but still stored
  EXPECT_EQ(t.stored("a")->stage, 2);
  const auto dropped = t.expire(6);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].peer_id, "a");
  EXPECT_EQ(dropped[0].stage, 2);
  EXPECT_FALSE(t.stored("a").has_value());
  EXPECT_TRUE(t.expire(6).empty());
  EXPECT_EQ(t.size(), 1u);
}

TEST(PeerTable, RemoveWithdrawsAtOnce) {
  PeerTable t(10);
  t.upsert(worker("a", 0), 0);
  EXPECT_TRUE(t.remove("a"));
  EXPECT_FALSE(t.remove("a"));
  EXPECT_FALSE(t.is_live("a", 0));
  EXPECT_TRUE(t.live(0).empty());
  EXPECT_FALSE(t.is_live("never", 0));
}

TEST(PeerTable, ComesBackAfterExpiry) {
  PeerTable t(1);
  t.upsert(worker("a", 0), 0);
  t.expire(5);
  EXPECT_FALSE(t.is_live("a", 5));
  t.upsert(worker("a", 0), 5);
  EXPECT_TRUE(t.is_live("a", 5.5));
}

}  // namespace
}  // namespace swarm::planner
