// Placement and rebalancing with regions (planner/rebalance.h, "Regions"): each region's pool (its
// peers and the region-less ones) is balanced as a pipeline of its own, since trainers route
// inside their region; a peer only moves between stages of its own region.
#include <gtest/gtest.h>

#include "planner/rebalance.h"

namespace swarm::planner {
namespace {

PeerLoad peer(const std::string& id, int stage, const std::string& region, double sps = 1, double queue = 0) {
  PeerLoad p{id, stage, queue, sps, false};
  p.region = region;
  return p;
}

TEST(RebalanceRegions, PoolsAreARegionsPeersPlusTheRegionLessOnes) {
  const std::vector<PeerLoad> peers = {peer("u0", 0, "us"), peer("e0", 0, "eu"), peer("x", 1, ""),
                                       peer("u1", 1, "us")};
  EXPECT_EQ(regions_of(peers), (std::vector<std::string>{"eu", "us"}));
  const auto eu = region_pool(peers, "eu");
  ASSERT_EQ(eu.size(), 2u);
  EXPECT_EQ(eu[0].peer_id, "e0");
  EXPECT_EQ(eu[1].peer_id, "x");
  EXPECT_TRUE(regions_of({peer("a", 0, ""), peer("b", 1, "")}).empty());
}

// us holds both stages, eu only stage 0: an eu joiner fills eu's stage 1, which a region-blind
// placement (both stages already served) would not; a us joiner goes where us is short.
TEST(RebalanceRegions, AJoinerFillsTheStageItsOwnRegionLacks) {
  const std::vector<PeerLoad> peers = {peer("u0", 0, "us"), peer("u1", 1, "us"), peer("u2", 1, "us"),
                                       peer("e0", 0, "eu")};
  EXPECT_EQ(choose_stage_for_joiner(peers, 2, {}, "eu"), 1);
  EXPECT_EQ(choose_stage_for_joiner(peers, 2, {}, "us"), 0);
  // Region-blind (no region given): the swarm-wide pool, where stage 0 and 1 hold 2 each.
  EXPECT_EQ(choose_stage_for_joiner(peers, 2, {}), 0);
  // A region nobody runs in yet starts its own pipeline at stage 0.
  EXPECT_EQ(choose_stage_for_joiner(peers, 2, {}, "asia"), 0);
}

// Region-blind, 2/2 is balanced and nothing moves. Per region, eu has no stage 1 (its trainers
// send every microbatch to us for it): one of eu's two stage-0 peers moves there, never a us peer.
TEST(RebalanceRegions, ARegionMissingAStageGetsItFromItsOwnPeers) {
  const std::vector<PeerLoad> peers = {peer("u0", 1, "us"), peer("u1", 1, "us"), peer("e0", 0, "eu"),
                                       peer("e1", 0, "eu")};
  std::vector<PeerLoad> blind = peers;
  for (auto& p : blind) p.region.clear();
  EXPECT_FALSE(Rebalancer(RebalanceOptions{}).plan(blind, 2, 0).has_value());
  const auto m = Rebalancer(RebalanceOptions{}).plan(peers, 2, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->peer_id, "e0");
  EXPECT_EQ(m->from_stage, 0);
  EXPECT_EQ(m->to_stage, 1);
  EXPECT_NE(m->reason.find("region eu: stage 1 has no peers"), std::string::npos) << m->reason;
}

// Both regions could gain; the one whose own pipeline is slower goes first. us: 3 fast peers on
// stage 0, 1 on stage 1 (bottleneck 4); eu: 3/1 of slow peers (bottleneck 1).
TEST(RebalanceRegions, TheRegionWithTheSlowestPipelineIsBalancedFirst) {
  const std::vector<PeerLoad> peers = {peer("u0", 0, "us", 4), peer("u1", 0, "us", 4), peer("u2", 0, "us", 4),
                                       peer("u3", 1, "us", 4), peer("e0", 0, "eu", 1), peer("e1", 0, "eu", 1),
                                       peer("e2", 0, "eu", 1), peer("e3", 1, "eu", 1)};
  Rebalancer r(RebalanceOptions{});
  const auto first = r.plan(peers, 2, 0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->peer_id, "e0");
  EXPECT_EQ(first->to_stage, 1);
  EXPECT_NE(first->reason.find("region eu"), std::string::npos) << first->reason;
  // Carried out, the next period balances us.
  std::vector<PeerLoad> after = peers;
  after[4].stage = 1;
  r.record_move(*first, 0);
  const auto second = r.plan(after, 2, 31);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->peer_id, "u0");
  EXPECT_EQ(second->to_stage, 1);
  // Both regions 2/2: done.
  after[0].stage = 1;
  r.record_move(*second, 31);
  EXPECT_FALSE(r.plan(after, 2, 62).has_value());
}

// A region-less peer counts in every pool (it serves every region) but is never moved by a
// region's plan: here eu's stage 1 is served by it, so eu is whole and nothing moves (in us's
// pool, 1/2, moving u1 would gain nothing).
TEST(RebalanceRegions, ARegionLessPeerServesEveryPoolAndIsNotMovedByOne) {
  const std::vector<PeerLoad> peers = {peer("u0", 0, "us"), peer("u1", 1, "us"), peer("e0", 0, "eu"),
                                       peer("x", 1, "")};
  EXPECT_FALSE(Rebalancer(RebalanceOptions{}).plan(peers, 2, 0).has_value());
  // eu's peer on stage 1 beside x: eu lacks stage 0, and its own peer goes there (x stays, so
  // stage 1 keeps a peer).
  const std::vector<PeerLoad> lacking = {peer("u0", 0, "us"), peer("u1", 1, "us"), peer("e0", 1, "eu"),
                                         peer("x", 1, "")};
  const auto m = Rebalancer(RebalanceOptions{}).plan(lacking, 2, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->peer_id, "e0");
  EXPECT_EQ(m->to_stage, 0);
}

}  // namespace
}  // namespace swarm::planner
