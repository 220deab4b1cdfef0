// ActivationStore (worker/stage/activation_store.h): each entry is handed out once, and expires by
// age and by count, on a fake clock.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/stage/activation_store.h"
#include "tests/stage/fake_clock.h"

namespace swarm::runtime {
namespace {

constexpr double kStart = 50;  // the fake clock's first reading

TEST(ActivationStore, HandsEachEntryOutOnce) {
  FakeClock c(kStart);
  ActivationStore store(c.clock(), /*ttl_seconds=*/60, /*max_entries=*/8);
  store.put("a", torch::ones({2, 3}), torch::zeros({2, 3}), 2, /*step=*/7);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.samples(), 2);
  auto a = store.take("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->samples, 2);
  EXPECT_EQ(a->step, 7);
  EXPECT_EQ(a->created_at, 50);
  EXPECT_TRUE(a->input.equal(torch::ones({2, 3})));
  EXPECT_FALSE(store.take("a").has_value());
  EXPECT_FALSE(store.take("never kept").has_value());
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(store.samples(), 0);
}

TEST(ActivationStore, ARepeatedMicrobatchReplacesTheOlderEntry) {
  FakeClock c(kStart);
  ActivationStore store(c.clock(), 60, 8);
  store.put("a", {}, {}, 4, 1);
  c.now += 5;
  store.put("a", {}, {}, 3, 2);  // a trainer retried the forward
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.samples(), 3);
  auto a = store.take("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->step, 2);
  EXPECT_EQ(a->created_at, 55);
}

TEST(ActivationStore, ExpiresAnEntryJustPastItsAgeLimit) {
  FakeClock c(kStart);
  ActivationStore store(c.clock(), /*ttl_seconds=*/30, 8);
  store.put("old", {}, {}, 2, 0);
  c.now += 10;
  store.put("new", {}, {}, 5, 0);
  c.now += 20;  // "old" is exactly 30 s old: at its limit, kept
  EXPECT_EQ(store.expire(), 0u);
  EXPECT_EQ(store.size(), 2u);
  c.now += 0.25;  // past it
  EXPECT_EQ(store.expire(), 1u);
  EXPECT_FALSE(store.take("old").has_value());
  EXPECT_EQ(store.samples(), 5);
  c.now += 10;
  EXPECT_EQ(store.expire(), 1u);
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(store.samples(), 0);
}

TEST(ActivationStore, KeepsAtMostItsLimitDroppingTheFirstIdsInOrder) {
  FakeClock c(kStart);
  ActivationStore store(c.clock(), 60, /*max_entries=*/2);
  for (const char* mb : {"c", "a", "d", "b"}) store.put(mb, {}, {}, 1, 0);
  EXPECT_EQ(store.size(), 4u);  // put does not enforce the limit; expire does
  EXPECT_EQ(store.expire(), 2u);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.samples(), 2);
  EXPECT_FALSE(store.take("a").has_value());
  EXPECT_FALSE(store.take("b").has_value());
  EXPECT_TRUE(store.take("c").has_value());
  EXPECT_TRUE(store.take("d").has_value());
}

TEST(ActivationStore, ClearReturnsTheSamplesOwedABackward) {
  FakeClock c(kStart);
  ActivationStore store(c.clock(), 60, 8);
  EXPECT_EQ(store.clear(), 0);
  store.put("a", {}, {}, 3, 0);
  store.put("b", {}, {}, 4, 0);
  EXPECT_EQ(store.clear(), 7);
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(store.samples(), 0);
}

}  // namespace
}  // namespace swarm::runtime
