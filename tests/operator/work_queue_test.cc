#include "operator/kube/work_queue.h"

#include <gtest/gtest.h>

#include <thread>

namespace swarm::kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, DeduplicatesAndKeepsOrder) {
  WorkQueue q;
  q.add("a");
  q.add("b");
  q.add("a");
  EXPECT_EQ(q.depth(), 2u);
  std::string k;
  ASSERT_TRUE(q.get(k));
  EXPECT_EQ(k, "a");
  ASSERT_TRUE(q.get(k));
  EXPECT_EQ(k, "b");
}

TEST(WorkQueue, AKeyBeingProcessedIsRequeuedByDoneNotHandedOutTwice) {
  WorkQueue q;
  q.add("a");
  std::string k;
  ASSERT_TRUE(q.get(k));
  q.add("a");  // changed while processing
  EXPECT_EQ(q.depth(), 0u);
  q.done("a");
  EXPECT_EQ(q.depth(), 1u);
}

TEST(WorkQueue, PerItemExponentialBackoffAndForget) {
  WorkQueue q(10ms, 1000ms);
  EXPECT_EQ(q.next_backoff("a"), 10ms);
  q.add_rate_limited("a");
  EXPECT_EQ(q.next_backoff("a"), 20ms);
  q.add_rate_limited("a");
  q.add_rate_limited("a");
  EXPECT_EQ(q.next_backoff("a"), 80ms);
  EXPECT_EQ(q.next_backoff("b"), 10ms) << "per item";
  for (int i = 0; i < 20; ++i) q.add_rate_limited("a");
  EXPECT_EQ(q.next_backoff("a"), 1000ms) << "capped";
  q.forget("a");
  EXPECT_EQ(q.failures("a"), 0);
}

TEST(WorkQueue, DelayedKeysArriveOnTime) {
  WorkQueue q;
  const auto t0 = std::chrono::steady_clock::now();
  q.add_after("late", 100ms);
  q.add_after("early", 30ms);
  std::string k;
  ASSERT_TRUE(q.get(k));
  EXPECT_EQ(k, "early");
  ASSERT_TRUE(q.get(k));
  EXPECT_EQ(k, "late");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
}

TEST(WorkQueue, EarlierDelayWins) {
  WorkQueue q;
  q.add_after("a", 10s);
  q.add_after("a", 10ms);
  EXPECT_EQ(q.delayed(), 1u);
  std::string k;
  ASSERT_TRUE(q.get(k));
  EXPECT_EQ(k, "a");
}

TEST(WorkQueue, ShutdownWakesWaiters) {
  WorkQueue q;
  std::thread t([&] {
    std::string k;
    EXPECT_FALSE(q.get(k));
  });
  std::this_thread::sleep_for(20ms);
  q.shutdown();
  t.join();
}

// Issue 29: the API server answers again. Keys backing off (and keys planned for later) are
// ready at once, and the next failure backs off from the first step again.
TEST(WorkQueue, RetryWaitingNowMakesEveryWaitingKeyReadyAndRestartsTheBackoff) {
  WorkQueue q(10ms, 5000ms);
  for (int i = 0; i < 10; ++i) q.add_rate_limited("a");  // 10 failures: 5 s from now
  q.add_after("b", 1h);
  EXPECT_EQ(q.depth(), 0u);
  EXPECT_EQ(q.delayed(), 2u);
  EXPECT_EQ(q.next_backoff("a"), 5000ms);
  q.retry_waiting_now();
  EXPECT_EQ(q.depth(), 2u);
  EXPECT_EQ(q.delayed(), 0u);
  EXPECT_EQ(q.next_backoff("a"), 10ms);
  std::string k;
  ASSERT_TRUE(q.get(k));
  ASSERT_TRUE(q.get(k));
  q.done("a");
  q.done("b");
  q.retry_waiting_now();  // nothing waiting: nothing made ready
  EXPECT_EQ(q.depth(), 0u);
}

}  // namespace
}  // namespace swarm::kube
