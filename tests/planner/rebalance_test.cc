#include "planner/rebalance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

namespace swarm::planner {
namespace {

PeerLoad peer(const std::string& id, int stage, double sps = 1, double queue = 0,
              bool joining = false) {
  return PeerLoad{id, stage, queue, sps, joining};
}

std::vector<int> counts(const std::vector<PeerLoad>& peers, int num_stages) {
  std::vector<int> c(static_cast<size_t>(num_stages), 0);
  for (const auto& p : peers) c[static_cast<size_t>(p.stage)] += 1;
  return c;
}

// Independent oracle: min over stages of the sum of speeds (0 for an empty stage).
double bottleneck_of(const std::vector<PeerLoad>& peers, int num_stages) {
  std::vector<double> t(static_cast<size_t>(num_stages), 0);
  for (const auto& p : peers) t[static_cast<size_t>(p.stage)] += p.samples_per_second;
  return *std::min_element(t.begin(), t.end());
}

double best_static_bottleneck(const std::vector<PeerLoad>& peers, int num_stages) {
  std::vector<PeerLoad> trial = peers;
  size_t combos = 1;
  for (size_t i = 0; i < peers.size(); ++i) combos *= static_cast<size_t>(num_stages);
  double best = 0;
  for (size_t code = 0; code < combos; ++code) {
    size_t rest = code;
    for (auto& p : trial) {
      p.stage = static_cast<int>(rest % static_cast<size_t>(num_stages));
      rest /= static_cast<size_t>(num_stages);
    }
    best = std::max(best, bottleneck_of(trial, num_stages));
  }
  return best;
}

void apply_move(std::vector<PeerLoad>& peers, const Move& m) {
  for (auto& p : peers) {
    if (p.peer_id == m.peer_id) {
      ASSERT_EQ(p.stage, m.from_stage);
      p.stage = m.to_stage;
      return;
    }
  }
  FAIL() << "move of unknown peer " << m.peer_id;
}

// Runs `periods` planning periods (time advances past period and cooldown each time), applying
// every move. Returns the number of moves.
int run_periods(Rebalancer& r, std::vector<PeerLoad>& peers, int num_stages, double& now,
                int periods) {
  const double step = std::max(r.options().period_seconds, r.options().cooldown_seconds) + 1;
  int moves = 0;
  for (int i = 0; i < periods; ++i) {
    const double before = bottleneck_of(peers, num_stages);
    if (auto m = r.plan(peers, num_stages, now)) {
      EXPECT_NE(m->from_stage, m->to_stage);
      EXPECT_NEAR(m->bottleneck_before, before, 1e-9);
      apply_move(peers, *m);
      r.record_move(*m, now);
      EXPECT_NEAR(m->bottleneck_after, bottleneck_of(peers, num_stages), 1e-9);
      EXPECT_GE(m->bottleneck_after, m->bottleneck_before - 1e-12) << m->reason;
      for (int c : counts(peers, num_stages)) EXPECT_GE(c, r.options().min_peers_per_stage);
      ++moves;
    }
    now += step;
  }
  return moves;
}

// ---------------------------------------------------------------------------------- load model

TEST(RebalanceLoads, StageLoadsMathWithUnknownThroughputAndEmptyStage) {
  // Known speeds 5, 25, 10 -> median 10 for p3.
  const std::vector<PeerLoad> peers = {peer("p0", 0, 5, 10), peer("p1", 0, 25, 20),
                                       peer("p2", 1, 10, 6), peer("p3", 1, 0, 4)};
  const auto l = stage_loads(peers, 3);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].stage, 0);
  EXPECT_EQ(l[0].peers, 2);
  EXPECT_DOUBLE_EQ(l[0].throughput, 30);
  EXPECT_DOUBLE_EQ(l[0].queue, 30);
  EXPECT_DOUBLE_EQ(l[0].load, 1.0);
  EXPECT_EQ(l[1].peers, 2);
  EXPECT_DOUBLE_EQ(l[1].throughput, 20);
  EXPECT_DOUBLE_EQ(l[1].load, 0.5);
  EXPECT_EQ(l[2].stage, 2);
  EXPECT_EQ(l[2].peers, 0);
  EXPECT_DOUBLE_EQ(l[2].throughput, 0);
  EXPECT_TRUE(std::isinf(l[2].load));
  EXPECT_DOUBLE_EQ(bottleneck_throughput(l), 0);
  EXPECT_DOUBLE_EQ(bottleneck_throughput(stage_loads(peers, 2)), 20);
  EXPECT_DOUBLE_EQ(bottleneck_throughput({}), 0);
  EXPECT_TRUE(stage_loads(peers, 0).empty());
}

TEST(RebalanceLoads, UnknownThroughputEstimate) {
  EXPECT_DOUBLE_EQ(unknown_throughput_estimate({}), 1);
  EXPECT_DOUBLE_EQ(unknown_throughput_estimate({peer("a", 0, 0), peer("b", 0, -3)}), 1);
  EXPECT_DOUBLE_EQ(unknown_throughput_estimate({peer("a", 0, 2), peer("b", 0, 4)}), 3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(unknown_throughput_estimate(
                       {peer("a", 0, 9), peer("b", 1, 1), peer("c", 0, nan), peer("d", 0, inf),
                        peer("e", 1, 3)}),
                   3);
  // Unknown peers everywhere: each counts as 1 sample/s.
  const auto l = stage_loads({peer("a", 0, 0, 2), peer("b", 1, 0, 8), peer("c", 1, 0)}, 2);
  EXPECT_DOUBLE_EQ(l[0].load, 2);
  EXPECT_DOUBLE_EQ(l[1].throughput, 2);
  EXPECT_DOUBLE_EQ(l[1].load, 4);
}

TEST(RebalanceLoads, IgnoresOutOfRangeStagesAndBadQueues) {
  const auto l = stage_loads({peer("a", 0, 2, -5), peer("x", -1, 100, 100), peer("y", 7, 1, 1),
                              peer("b", 1, 4, std::nan(""))},
                             2);
  EXPECT_EQ(l[0].peers, 1);
  EXPECT_DOUBLE_EQ(l[0].queue, 0);
  EXPECT_DOUBLE_EQ(l[0].throughput, 2);
  EXPECT_DOUBLE_EQ(l[1].queue, 0);
  EXPECT_DOUBLE_EQ(l[1].load, 0);
}

// ---------------------------------------------------------------------------------- joiners

TEST(RebalanceJoiner, GoesToTheBottleneckStageNotToABacklogOnAFasterOne) {
  // Throughputs 1, 2, 3; loads 2, 5, 1. Stage 1's backlog is a snapshot on a stage with twice the
  // bottleneck's capacity: the joiner goes to stage 0, which caps the pipeline.
  const std::vector<PeerLoad> peers = {peer("a", 0, 1, 2), peer("b", 1, 2, 10),
                                       peer("c", 2, 3, 3)};
  EXPECT_EQ(choose_stage_for_joiner(peers, 3), 0);
}

TEST(RebalanceJoiner, QueueDecidesAmongStagesOfAboutTheBottlenecksCapacity) {
  // Stages 0 and 1 are within min_gain (25% by default) of each other: the higher load wins.
  const std::vector<PeerLoad> peers = {peer("a", 0, 1.0, 2), peer("b", 1, 1.05, 10),
                                       peer("c", 2, 3, 3)};
  EXPECT_EQ(choose_stage_for_joiner(peers, 3), 1);
  // With a band of 0 only the slowest stage qualifies.
  RebalanceOptions exact;
  exact.min_gain = 0;
  EXPECT_EQ(choose_stage_for_joiner(peers, 3, exact), 0);
}

TEST(RebalanceJoiner, EmptyStageFirstThenTiesByFewerPeersThenLowestIndex) {
  EXPECT_EQ(choose_stage_for_joiner({peer("a", 0, 1, 1000), peer("b", 1)}, 3), 2);
  EXPECT_EQ(choose_stage_for_joiner({peer("a", 1, 1, 1000)}, 3), 0);  // two empty: lowest index
  // All loads 0: fewer peers wins, then lowest index.
  EXPECT_EQ(choose_stage_for_joiner({peer("a", 0), peer("b", 0), peer("c", 1), peer("d", 2)}, 3),
            1);
  EXPECT_EQ(choose_stage_for_joiner({peer("a", 0), peer("b", 1), peer("c", 2)}, 3), 0);
  EXPECT_EQ(choose_stage_for_joiner({}, 0), -1);
  // The joiner itself, listed without a stage, is ignored.
  EXPECT_EQ(choose_stage_for_joiner({peer("me", -1), peer("a", 0)}, 2), 1);
}

TEST(RebalanceJoiner, SimultaneousJoinersSpreadBecauseJoiningPeersCount) {
  std::vector<PeerLoad> peers;
  std::vector<int> chosen;
  for (int i = 0; i < 6; ++i) {
    const int s = choose_stage_for_joiner(peers, 3);
    chosen.push_back(s);
    peers.push_back(peer("j" + std::to_string(i), s, 0, 0, /*joining=*/true));
  }
  EXPECT_EQ(chosen, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

// ---------------------------------------------------------------------------------- donors

TEST(RebalanceDonor, SixJoinersOverThreeDonorsEndUpTwoEach) {
  const std::vector<PeerLoad> stage = {peer("d0", 0, 10, 3), peer("d1", 0, 10, 3),
                                       peer("d2", 0, 10, 3), peer("new", 0, 0, 0, true)};
  std::map<std::string, int> in_progress;
  std::set<std::string> first_three;
  for (int i = 0; i < 6; ++i) {
    const auto d = choose_donor(stage, "joiner-" + std::to_string(i), in_progress);
    ASSERT_TRUE(d.has_value());
    EXPECT_NE(*d, "new");
    in_progress[*d] += 1;
    if (i < 3) first_three.insert(*d);
  }
  EXPECT_EQ(first_three.size(), 3u);
  EXPECT_EQ(in_progress, (std::map<std::string, int>{{"d0", 2}, {"d1", 2}, {"d2", 2}}));
}

TEST(RebalanceDonor, DifferentJoinersPickDifferentEqualDonorsDeterministically) {
  const std::vector<PeerLoad> stage = {peer("d0", 0), peer("d1", 0), peer("d2", 0)};
  std::map<std::string, int> picks;
  for (int i = 0; i < 30; ++i) {
    const std::string j = "worker-" + std::to_string(i);
    const auto d = choose_donor(stage, j, {});
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d, choose_donor(stage, j, {}));  // same question, same answer
    std::vector<PeerLoad> reversed(stage.rbegin(), stage.rend());
    EXPECT_EQ(d, choose_donor(reversed, j, {}));  // input order does not matter
    picks[*d] += 1;
  }
  EXPECT_EQ(picks.size(), 3u);
  for (const auto& [id, n] : picks) EXPECT_GE(n, 3) << id;
}

TEST(RebalanceDonor, PrefersFewestDonationsThenLowestLoad) {
  // Loads (queue/throughput): a 1.0, b 0.5, c 2/15 (unknown speed -> median of 10 and 20).
  const std::vector<PeerLoad> stage = {peer("a", 0, 10, 10), peer("b", 0, 20, 10),
                                       peer("c", 0, 0, 2)};
  EXPECT_EQ(choose_donor(stage, "j", {}), "c");
  EXPECT_EQ(choose_donor(stage, "j", {{"c", 1}}), "b");
  EXPECT_EQ(choose_donor(stage, "j", {{"b", 1}, {"c", 1}}), "a");
  EXPECT_EQ(choose_donor(stage, "j", {{"a", 2}, {"b", 1}, {"c", 1}}), "c");
}

TEST(RebalanceDonor, NeverAJoiningPeerOrTheJoinerItself) {
  EXPECT_FALSE(choose_donor({}, "j", {}).has_value());
  EXPECT_FALSE(
      choose_donor({peer("x", 0, 100, 0, true), peer("y", 0, 100, 0, true)}, "j", {}).has_value());
  EXPECT_FALSE(choose_donor({peer("j", 0, 100)}, "j", {}).has_value());
  // The only serving peer is busy and loaded; the idle joining peers are still never chosen.
  EXPECT_EQ(choose_donor({peer("x", 0, 100, 0, true), peer("s", 0, 1, 50)}, "j", {{"s", 5}}), "s");
}

// ---------------------------------------------------------------------------------- assignment

TEST(RebalanceAssign, InitialAssignmentIsRoundRobin) {
  EXPECT_EQ(initial_assignment(7, 3), (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(initial_assignment(2, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(initial_assignment(3, 1), (std::vector<int>{0, 0, 0}));
  EXPECT_TRUE(initial_assignment(0, 3).empty());
  EXPECT_TRUE(initial_assignment(3, 0).empty());
}

// ---------------------------------------------------------------------------------- rebalancer

std::vector<PeerLoad> four_one_one() {
  return {peer("a0", 0), peer("a1", 0), peer("a2", 0), peer("a3", 0), peer("b0", 1),
          peer("c0", 2)};
}

TEST(Rebalancer, ConvergesFrom411To222AndThenStops) {
  Rebalancer r(RebalanceOptions{});
  auto peers = four_one_one();
  double now = 0;
  const auto first = r.plan(peers, 3, now);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->from_stage, 0);
  EXPECT_TRUE(first->to_stage == 1 || first->to_stage == 2);
  EXPECT_FALSE(first->reason.empty());
  apply_move(peers, *first);
  r.record_move(*first, now);
  now += 100;
  EXPECT_EQ(run_periods(r, peers, 3, now, 10), 1);
  EXPECT_EQ(counts(peers, 3), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(run_periods(r, peers, 3, now, 20), 0);  // no flapping
}

TEST(Rebalancer, SlowedPeerReachesBestStaticAssignment) {
  int cases = 0;
  int improved = 0;
  for (int n : {6, 7, 8}) {
    for (int slow = 0; slow < n; ++slow) {
      for (bool skewed : {false, true}) {
        std::vector<PeerLoad> peers;
        const auto rr = initial_assignment(n, 3);
        for (int i = 0; i < n; ++i) {
          const int stage = skewed ? (i < n - 2 ? 0 : i - (n - 3)) : rr[static_cast<size_t>(i)];
          peers.push_back(peer("p" + std::to_string(i), stage, i == slow ? 1.0 / 3 : 1.0));
        }
        const double best = best_static_bottleneck(peers, 3);
        const double start = bottleneck_of(peers, 3);
        Rebalancer r(RebalanceOptions{});
        double now = 0;
        run_periods(r, peers, 3, now, 30);
        const double got = bottleneck_of(peers, 3);
        EXPECT_GE(got, 0.95 * best) << "n=" << n << " slow=" << slow << " skewed=" << skewed;
        EXPECT_EQ(run_periods(r, peers, 3, now, 20), 0) << "n=" << n << " slow=" << slow;
        ++cases;
        if (got > start + 1e-9) ++improved;
      }
    }
  }
  EXPECT_EQ(cases, 42);
  EXPECT_GE(improved, 20);  // most cases start below the best and need moves
}

TEST(Rebalancer, QueuedWorkPicksTheTargetAmongEqualThroughputs) {
  // Stages 1 and 2 both run at 2 samples/s; stage 2's backlog makes it the most loaded.
  const std::vector<PeerLoad> peers = {peer("a", 0), peer("b", 0), peer("c", 0), peer("x", 0),
                                       peer("d", 1), peer("e", 1), peer("f", 2, 1, 50),
                                       peer("g", 2, 1, 50)};
  const auto m = Rebalancer(RebalanceOptions{}).plan(peers, 3, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->from_stage, 0);
  EXPECT_EQ(m->to_stage, 2);
}

TEST(Rebalancer, BacklogOnAStageAboveTheBottleneckDoesNotMakeItTheTarget) {
  // 3/2/1 equal peers with a queue snapshot on stage 1: stage 2 (one peer) is the bottleneck.
  const std::vector<PeerLoad> peers = {peer("a0", 0), peer("a1", 0), peer("a2", 0),
                                       peer("b0", 1, 1, 20), peer("b1", 1, 1, 20), peer("c0", 2)};
  const auto m = Rebalancer(RebalanceOptions{}).plan(peers, 3, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->from_stage, 0);
  EXPECT_EQ(m->to_stage, 2);
  EXPECT_DOUBLE_EQ(m->bottleneck_before, 1);
  EXPECT_DOUBLE_EQ(m->bottleneck_after, 2);
}

// Measured capacities are noisy: every period each peer reads its true speed times a factor in
// [1 - noise, 1 + noise]. With min_gain above twice the noise, a balanced swarm never moves and an
// imbalanced one converges and then stays put.
TEST(Rebalancer, NoisyMeasurementsDoNotMakePeersFlap) {
  std::mt19937 rng(7);
  const double noise = 0.12;
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  RebalanceOptions o;
  o.min_gain = 0.25;
  o.period_seconds = 10;
  o.cooldown_seconds = 10;
  struct Case {
    std::vector<PeerLoad> peers;  // true speeds
    int max_moves;
  };
  std::vector<Case> cases;
  cases.push_back({{peer("a0", 0), peer("a1", 0), peer("b0", 1), peer("b1", 1), peer("c0", 2),
                    peer("c1", 2)},
                   0});
  cases.push_back({four_one_one(), 2});
  // One peer 3x slower on stage 1 of 3/2/2: one move 0 -> 1 reaches the best static assignment.
  cases.push_back({{peer("a0", 0), peer("a1", 0), peer("a2", 0), peer("slow", 1, 1.0 / 3),
                    peer("b1", 1), peer("c0", 2), peer("c1", 2)},
                   1});
  for (size_t k = 0; k < cases.size(); ++k) {
    auto truth = cases[k].peers;
    Rebalancer r(o);
    double now = 0;
    int moves = 0;
    for (int period = 0; period < 300; ++period, now += 11) {
      auto measured = truth;
      for (auto& p : measured) p.samples_per_second *= jitter(rng);
      if (auto m = r.plan(measured, 3, now)) {
        apply_move(truth, *m);
        r.record_move(*m, now);
        ++moves;
      }
    }
    EXPECT_EQ(moves, cases[k].max_moves) << "case " << k;
    EXPECT_GE(bottleneck_of(truth, 3), 0.95 * best_static_bottleneck(truth, 3)) << "case " << k;
  }
}

TEST(Rebalancer, StageCostsScaleAMovedPeersSpeed) {
  // Stage 1 costs 3x per sample: its 5 peers measure 100 each (500), stage 0's 4 peers 300 each.
  std::vector<PeerLoad> peers = {peer("a0", 0, 300), peer("a1", 0, 300), peer("a2", 0, 300),
                                 peer("a3", 0, 300)};
  for (int i = 0; i < 5; ++i) peers.push_back(peer("b" + std::to_string(i), 1, 100));
  RebalanceOptions o;
  o.stage_costs = {1.0, 3.0};
  // Moved to stage 1, a0 serves about 100 there: 500 -> 600 (+20%), below min_gain 25%.
  EXPECT_FALSE(Rebalancer(o).plan(peers, 2, 0).has_value());
  // Taking its 300 along (no costs) would claim 500 -> 800 and move it for nothing.
  const auto naive = Rebalancer(RebalanceOptions{}).plan(peers, 2, 0);
  ASSERT_TRUE(naive.has_value());
  EXPECT_NEAR(naive->bottleneck_after, 800, 1e-9);
  // With fewer peers on stage 1 a move is worth it, and the arrival speed is scaled.
  peers.resize(6);  // 4 x 300 on stage 0, 2 x 100 on stage 1
  const auto m = Rebalancer(o).plan(peers, 2, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to_stage, 1);
  EXPECT_NEAR(m->bottleneck_after, 300, 1e-9);
  EXPECT_NE(m->reason.find("serves about 100 samples/s there"), std::string::npos) << m->reason;
  // Bad entries count as 1: the same answer as without costs.
  RebalanceOptions bad;
  bad.stage_costs = {-1, std::nan("")};
  peers.resize(4);
  for (int i = 0; i < 5; ++i) peers.push_back(peer("b" + std::to_string(i), 1, 100));
  const auto b = Rebalancer(bad).plan(peers, 2, 0);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->peer_id, naive->peer_id);
}

TEST(Rebalancer, HysteresisBlocksASmallGain) {
  // Stage 1 runs at 1.0; any move from stage 0 lifts the slower of the two to 1.05 (+5%).
  const std::vector<PeerLoad> peers = {peer("a", 0, 1.0), peer("b", 0, 0.05), peer("d", 0, 1.0),
                                       peer("c", 1, 1.0)};
  Rebalancer strict(RebalanceOptions{});  // min_gain 25%
  EXPECT_FALSE(strict.plan(peers, 2, 0).has_value());
  EXPECT_FALSE(strict.plan(peers, 2, 1000).has_value());
  RebalanceOptions loose;
  loose.min_gain = 0.04;
  const auto m = Rebalancer(loose).plan(peers, 2, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to_stage, 1);
  EXPECT_NEAR(m->bottleneck_after, 1.05, 1e-9);
}

TEST(Rebalancer, MinimumPeersPerStageRespected) {
  // Without the minimum, moving x to stage 1 would lift the bottleneck from 0.4 to 1.
  const std::vector<PeerLoad> peers = {peer("x", 0), peer("y", 0), peer("z", 1, 0.2),
                                       peer("w", 1, 0.2)};
  RebalanceOptions two;
  two.min_peers_per_stage = 2;
  EXPECT_FALSE(Rebalancer(two).plan(peers, 2, 0).has_value());
  const auto m = Rebalancer(RebalanceOptions{}).plan(peers, 2, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->peer_id, "x");
  // A longer run never takes a stage below the minimum (checked inside run_periods).
  std::vector<PeerLoad> many = {peer("a", 0), peer("b", 0), peer("c", 0), peer("d", 1),
                                peer("e", 1), peer("f", 2, 0.5), peer("g", 2, 0.5)};
  Rebalancer r(two);
  double now = 0;
  EXPECT_EQ(run_periods(r, many, 3, now, 10), 1);
  EXPECT_EQ(counts(many, 3), (std::vector<int>{2, 2, 3}));
}

TEST(Rebalancer, EmptyStageIsFilledEvenBelowMinimumButNeverByEmptyingAnother) {
  RebalanceOptions two;
  two.min_peers_per_stage = 2;
  // Stage 2 is empty: the busiest stage by queue still loses to it.
  const std::vector<PeerLoad> peers = {peer("a", 0, 1, 0), peer("b", 0, 1, 0),
                                       peer("c", 1, 1, 500), peer("d", 1, 1, 500)};
  const auto m = Rebalancer(two).plan(peers, 3, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to_stage, 2);
  EXPECT_EQ(m->from_stage, 0);  // least loaded source
  EXPECT_DOUBLE_EQ(m->bottleneck_before, 0);
  EXPECT_DOUBLE_EQ(m->bottleneck_after, 1);
  // One peer per stage: filling stage 2 would empty another one.
  EXPECT_FALSE(Rebalancer(two).plan({peer("a", 0), peer("c", 1)}, 3, 0).has_value());
  // A stage whose other peer is still joining keeps its only serving peer (the joiner's donor).
  EXPECT_FALSE(
      Rebalancer(two).plan({peer("a", 0), peer("j", 0, 1, 0, true), peer("c", 1)}, 3, 0));
}

TEST(Rebalancer, JoiningPeersAreNeverMoved) {
  // "a0" is joining and would otherwise come first by id.
  const std::vector<PeerLoad> peers = {peer("a0", 0, 1, 0, true), peer("a1", 0), peer("a2", 0),
                                       peer("c", 1, 0.1)};
  const auto m = Rebalancer(RebalanceOptions{}).plan(peers, 2, 0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->peer_id, "a1");
}

TEST(Rebalancer, PeriodStartsAtTheFirstMove) {
  RebalanceOptions o;
  o.cooldown_seconds = 0;
  Rebalancer r(o);
  auto peers = four_one_one();
  const auto m = r.plan(peers, 3, 5);  // first call: allowed at any time
  ASSERT_TRUE(m.has_value());
  apply_move(peers, *m);
  r.record_move(*m, 5);
  EXPECT_FALSE(r.plan(peers, 3, 5 + o.period_seconds - 0.5).has_value());
  EXPECT_TRUE(r.plan(peers, 3, 5 + o.period_seconds).has_value());
}

TEST(Rebalancer, CooldownRespected) {
  RebalanceOptions o;
  o.period_seconds = 0;
  o.cooldown_seconds = 100;
  const std::vector<PeerLoad> peers = {peer("a", 0), peer("b", 0), peer("c", 1, 0.1)};
  Rebalancer r(o);
  r.record_move(Move{"a", 1, 0, 0, 0, "test"}, 0);
  EXPECT_TRUE(r.in_cooldown("a", 99));
  auto m = r.plan(peers, 2, 10);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->peer_id, "b");
  r.record_move(*m, 10);
  EXPECT_FALSE(r.plan(peers, 2, 50).has_value());
  m = r.plan(peers, 2, 100);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->peer_id, "a");
  EXPECT_FALSE(r.in_cooldown("a", 100));
}

TEST(Rebalancer, SingleStageSwarmNeverMoves) {
  Rebalancer r(RebalanceOptions{});
  const std::vector<PeerLoad> peers = {peer("a", 0, 1, 100), peer("b", 0, 50, 0),
                                       peer("c", 0, 0.1, 7)};
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(r.plan(peers, 1, i * 1000.0).has_value());
    EXPECT_FALSE(r.plan(peers, 0, i * 1000.0).has_value());
  }
}

TEST(Rebalancer, TiesAreDeterministic) {
  const auto base = four_one_one();
  const auto expected = Rebalancer(RebalanceOptions{}).plan(base, 3, 0);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(expected->peer_id, "a0");  // equal peers: lowest id
  EXPECT_EQ(expected->to_stage, 1);    // equal empty-queue stages: lowest index
  std::mt19937 rng(42);
  for (int i = 0; i < 20; ++i) {
    auto shuffled = base;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const auto m = Rebalancer(RebalanceOptions{}).plan(shuffled, 3, 0);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->peer_id, expected->peer_id);
    EXPECT_EQ(m->from_stage, expected->from_stage);
    EXPECT_EQ(m->to_stage, expected->to_stage);
    EXPECT_EQ(m->reason, expected->reason);
  }
}

TEST(Rebalancer, RejectsBadOptions) {
  RebalanceOptions o;
  o.min_peers_per_stage = 0;
  EXPECT_THROW(Rebalancer{o}, std::invalid_argument);
  o = {};
  o.min_gain = -0.1;
  EXPECT_THROW(Rebalancer{o}, std::invalid_argument);
  o = {};
  o.period_seconds = -1;
  EXPECT_THROW(Rebalancer{o}, std::invalid_argument);
}

}  // namespace
}  // namespace swarm::planner
