#include "planner/stage_router.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <thread>

namespace swarm::planner {
namespace {

std::string pick(StageRouter& r, double now, const std::vector<std::string>& exclude = {},
                 Op op = Op::Forward, int64_t samples = 1) {
  auto p = r.pick_peer(op, samples, now, exclude);
  EXPECT_TRUE(p.has_value());
  return p.value_or("");
}

PeerStats stats_of(const StageRouter& r, const std::string& id) {
  for (const auto& s : r.stats()) {
    if (s.peer_id == id) return s;
  }
  ADD_FAILURE() << "no stats for " << id;
  return {};
}

// Every peer measured once at `seconds_per_sample`.
void measure_all(StageRouter& r, const std::map<std::string, double>& truth, double now) {
  for (const auto& [id, spp] : truth) r.report_success(id, Op::Forward, 1, spp, now);
}

TEST(StageRouter, SharesFollowThroughputAndPicksInterleave) {
  const std::map<std::string, double> truth = {{"fast", 1.0}, {"mid", 2.0}, {"slow", 4.0}};
  StageRouter r(RouterOptions{});
  r.set_peers({"fast", "mid", "slow"}, 0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> noise(0.8, 1.2);
  std::map<std::string, int> count;
  std::map<std::string, int> max_run;
  std::string prev;
  int run = 0;
  double now = 0;
  const int kPicks = 7000;
  for (int i = 0; i < kPicks; ++i) {
    now += 0.01;
    const std::string p = pick(r, now, {}, Op::Forward, 8);
    ++count[p];
    run = p == prev ? run + 1 : 1;
    prev = p;
    max_run[p] = std::max(max_run[p], run);
    r.report_success(p, Op::Forward, 8, truth.at(p) * 8 * noise(rng), now);
  }
  EXPECT_NEAR(count["fast"] / double(kPicks), 4.0 / 7, 0.03);
  EXPECT_NEAR(count["mid"] / double(kPicks), 2.0 / 7, 0.03);
  EXPECT_NEAR(count["slow"] / double(kPicks), 1.0 / 7, 0.03);
  const int bound = static_cast<int>(std::ceil(4.0 / 1.0)) + 1;  // slowest / fastest
  for (const auto& [id, m] : max_run) EXPECT_LE(m, bound) << id;
  EXPECT_LE(max_run["fast"], 3);  // fast vs mid is 2:1, so fast never runs more than 2-3 times
  EXPECT_NEAR(stats_of(r, "mid").seconds_per_sample, 2.0, 0.3);
}

TEST(StageRouter, NewPeerIsTriedPromptlyWithoutBurst) {
  StageRouter r(RouterOptions{});
  r.set_peers({"a", "b", "c"}, 0);
  measure_all(r, {{"a", 1.0}, {"b", 2.0}, {"c", 4.0}}, 0);
  double now = 0;
  for (int i = 0; i < 300; ++i) pick(r, now += 0.01);
  r.set_peers({"a", "b", "c", "d"}, now);
  int first = -1;
  int d_picks = 0;
  for (int i = 0; i < 20; ++i) {
    if (pick(r, now += 0.01) == "d") {
      if (first < 0) first = i;
      ++d_picks;
    }
  }
  EXPECT_GE(first, 0);
  EXPECT_LT(first, 4);
  // Unmeasured d costs the median (2 s/sample): about 2/9 of the picks, not a burst.
  EXPECT_LE(d_picks, 8);
}

TEST(StageRouter, UnmeasuredPeerIsExploredAfterExploreSeconds) {
  RouterOptions o;
  o.explore_peer_seconds = 10;
  StageRouter r(o);
  r.set_peers({"a", "b"}, 0);
  // A huge first pick pushes its peer's virtual time far ahead; it never reports back.
  const std::string big = *r.pick_peer(Op::Forward, 1000000, 0);
  const std::string other = big == "a" ? "b" : "a";
  r.report_success(other, Op::Forward, 1, 1.0, 0);
  double now = 0;
  int big_picks = 0;
  double first_big = -1;
  while (now < 25) {
    now += 0.01;
    if (pick(r, now) == big) {
      ++big_picks;
      if (first_big < 0) first_big = now;
    }
  }
  EXPECT_GE(first_big, 10.0);
  EXPECT_LT(first_big, 10.1);
  EXPECT_EQ(big_picks, 2);  // at 10 s and again at 20 s: one forced pick per explore period
}

TEST(StageRouter, ExcludeIsHonoured) {
  StageRouter r(RouterOptions{});
  EXPECT_FALSE(r.pick_peer(Op::Forward, 1, 0).has_value());  // no peers
  r.set_peers({"a", "b", "c"}, 0);
  measure_all(r, {{"a", 1.0}, {"b", 1.0}, {"c", 1.0}}, 0);
  for (int i = 0; i < 100; ++i) EXPECT_NE(pick(r, i * 0.01, {"a"}), "a");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pick(r, 1, {"a", "b"}), "c");
  EXPECT_FALSE(r.pick_peer(Op::Forward, 1, 1, {"a", "b", "c"}).has_value());
  // After sitting out, a comes back without a catch-up burst.
  int a_picks = 0;
  for (int i = 0; i < 12; ++i) a_picks += pick(r, 2) == "a";
  EXPECT_GE(a_picks, 3);
  EXPECT_LE(a_picks, 6);
}

TEST(StageRouter, BannedPeerIsAvoidedAndRetriedAfterBan) {
  StageRouter r(RouterOptions{});
  r.set_peers({"a", "b"}, 0);
  measure_all(r, {{"a", 1.0}, {"b", 1.0}}, 0);
  r.report_failure("a", 0);
  EXPECT_TRUE(stats_of(r, "a").banned);
  EXPECT_DOUBLE_EQ(stats_of(r, "a").banned_until, 2.0);
  EXPECT_EQ(stats_of(r, "a").failures, 1);
  for (double t = 0; t < 1.99; t += 0.01) EXPECT_EQ(pick(r, t), "b");
  bool retried = false;
  for (int i = 0; i < 2; ++i) retried |= pick(r, 2.0) == "a";
  EXPECT_TRUE(retried);
  EXPECT_FALSE(stats_of(r, "a").banned);
  int a_picks = 0;
  for (int i = 0; i < 10; ++i) a_picks += pick(r, 2.5) == "a";
  EXPECT_LE(a_picks, 6);
}

TEST(StageRouter, AllBannedFallsBackToEarliestBanEnd) {
  StageRouter r(RouterOptions{});
  r.set_peers({"a", "b"}, 0);
  r.report_failure("b", 0);  // until 2
  r.report_failure("a", 1);  // until 3
  EXPECT_EQ(pick(r, 1.5), "b");
  EXPECT_EQ(pick(r, 1.5, {"b"}), "a");
  EXPECT_FALSE(r.pick_peer(Op::Forward, 1, 1.5, {"a", "b"}).has_value());
}

TEST(StageRouter, BanDoublesPerConsecutiveFailureAndSuccessResets) {
  StageRouter r(RouterOptions{});  // ban 2 s, max 30 s
  r.set_peers({"a", "b"}, 0);
  const double expected[] = {2, 4, 8, 16, 30, 30};
  double t = 0;
  for (double d : expected) {
    r.report_failure("a", t);
    EXPECT_DOUBLE_EQ(stats_of(r, "a").banned_until, t + d);
    t += 100;
  }
  r.report_success("a", Op::Forward, 1, 1.0, t);
  r.report_failure("a", t);
  EXPECT_DOUBLE_EQ(stats_of(r, "a").banned_until, t + 2);
  EXPECT_EQ(stats_of(r, "a").failures, 7);
}

TEST(StageRouter, SetPeersKeepsAddsAndDrops) {
  StageRouter r(RouterOptions{});
  r.set_peers({"a", "b", "c"}, 0);
  measure_all(r, {{"a", 1.0}, {"b", 3.0}, {"c", 1.0}}, 0);
  for (int i = 0; i < 30; ++i) pick(r, 0.1);
  const PeerStats b_before = stats_of(r, "b");
  r.set_peers({"b", "c", "d", "d"}, 1);
  EXPECT_EQ(r.size(), 3u);
  const auto st = r.stats();
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].peer_id, "b");
  EXPECT_EQ(st[1].peer_id, "c");
  EXPECT_EQ(st[2].peer_id, "d");
  EXPECT_EQ(st[0].picks, b_before.picks);
  EXPECT_DOUBLE_EQ(st[0].seconds_per_sample, 3.0);
  EXPECT_EQ(st[2].picks, 0);
  EXPECT_EQ(st[2].seconds_per_sample, 0);
  for (int i = 0; i < 50; ++i) EXPECT_NE(pick(r, 1.5), "a");
  r.report_success("a", Op::Forward, 1, 1.0, 2);  // unknown peer: ignored
  r.set_peers({"a", "b"}, 3);                      // a comes back fresh
  EXPECT_EQ(stats_of(r, "a").picks, 0);
  EXPECT_EQ(stats_of(r, "a").seconds_per_sample, 0);
  r.set_peers({}, 4);
  EXPECT_EQ(r.size(), 0u);
  EXPECT_FALSE(r.pick_peer(Op::Forward, 1, 4).has_value());
}

TEST(StageRouter, BackwardWeightCounts) {
  RouterOptions o;
  o.backward_weight = 2.0;
  StageRouter r(o);
  r.set_peers({"a", "b"}, 0);
  // A backward of 1 sample taking 2 s is 1 forward-equivalent second per sample.
  r.report_success("a", Op::Backward, 1, 2.0, 0);
  r.report_success("b", Op::Forward, 1, 1.0, 0);
  EXPECT_DOUBLE_EQ(stats_of(r, "a").seconds_per_sample, 1.0);
  EXPECT_DOUBLE_EQ(stats_of(r, "b").seconds_per_sample, 1.0);
  r.report_success("a", Op::Backward, 4, 4.0, 0);  // 0.5 forward-equivalent
  EXPECT_DOUBLE_EQ(stats_of(r, "a").seconds_per_sample, 0.1 * 0.5 + 0.9 * 1.0);
  r.report_success("a", Op::Forward, 1, 1.0, 0);  // back to equal speeds (approximately)
  // Equal peers: a backward pick costs two forwards, so the other peer gets the next two.
  StageRouter eq(o);
  eq.set_peers({"x", "y"}, 0);
  measure_all(eq, {{"x", 1.0}, {"y", 1.0}}, 0);
  pick(eq, 0);  // x (tie broken by order), y next
  pick(eq, 0);
  const std::string bw = pick(eq, 0, {}, Op::Backward);
  const std::string other = bw == "x" ? "y" : "x";
  EXPECT_EQ(pick(eq, 0), other);
  EXPECT_EQ(pick(eq, 0), other);
  // Over many mixed picks, forward-equivalent work is balanced.
  std::map<std::string, double> work;
  for (int i = 0; i < 3000; ++i) {
    const Op op = i % 3 == 0 ? Op::Backward : Op::Forward;
    work[pick(eq, 0, {}, op)] += op == Op::Backward ? 2 : 1;
  }
  EXPECT_NEAR(work["x"] / (work["x"] + work["y"]), 0.5, 0.01);
}

TEST(StageRouter, RejectsBadOptions) {
  RouterOptions o;
  o.ema_alpha = 0;
  EXPECT_THROW(StageRouter{o}, std::invalid_argument);
  o = RouterOptions{};
  o.backward_weight = 0;
  EXPECT_THROW(StageRouter{o}, std::invalid_argument);
}

TEST(StageRouter, ThreadSafetySmoke) {
  StageRouter r(RouterOptions{});
  const std::vector<std::string> peers = {"a", "b", "c", "d"};
  r.set_peers(peers, 0);
  std::atomic<int64_t> clock{0};
  std::atomic<int64_t> picked{0};
  constexpr int kThreads = 4;
  constexpr int kIters = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < kIters; ++i) {
        const double now = clock.fetch_add(1) * 1e-3;
        auto p = r.pick_peer(i % 2 ? Op::Backward : Op::Forward, 4, now, {peers[t]});
        if (!p) continue;
        ++picked;
        if (rng() % 50 == 0) {
          r.report_failure(*p, now);
        } else {
          r.report_success(*p, Op::Forward, 4, 0.01 * (1 + rng() % 4), now);
        }
        if (t == 0 && i % 100 == 0) r.set_peers(peers, now);
        if (t == 1 && i % 100 == 0) (void)r.stats();
      }
    });
  }
  for (auto& th : threads) th.join();
  int64_t total = 0;
  for (const auto& s : r.stats()) total += s.picks;
  EXPECT_EQ(picked.load(), int64_t{kThreads} * kIters);  // three peers always allowed
  EXPECT_EQ(total, picked.load());
}

}  // namespace
}  // namespace swarm::planner
