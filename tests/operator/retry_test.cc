#include "operator/kube/retry.h"

#include <gtest/gtest.h>

namespace swarm::kube {
namespace {

TEST(RetryDelay, DoublesFromHalfASecondAndStopsAtFiveSeconds) {
  // unit 0.5: the jitter's middle (factor 1.0).
  EXPECT_DOUBLE_EQ(retry_delay(1, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(retry_delay(2, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(retry_delay(4, 0.5), 4.0);
  EXPECT_DOUBLE_EQ(retry_delay(5, 0.5), 5.0);
  EXPECT_DOUBLE_EQ(retry_delay(1000, 0.5), 5.0);  // no overflow however long the server is away
}

TEST(RetryDelay, JitterSpreadsTwentyPercentEachWay) {
  EXPECT_DOUBLE_EQ(retry_delay(5, 0.0), 4.0);
  EXPECT_LT(retry_delay(5, 1.0), 6.0);
  EXPECT_GT(retry_delay(5, 1.0), 5.99);
  // Out-of-range inputs are clamped, never a negative or runaway wait.
  EXPECT_DOUBLE_EQ(retry_delay(0, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(retry_delay(-3, -1.0), 0.4);
  EXPECT_LT(retry_delay(3, 7.0), 2.4);
}

TEST(RetryDelay, TheWholeWaitAfterTheServerComesBackIsAtMostSixSeconds) {
  // Whatever the number of failures, the next try comes within cap x 1.2.
  for (int f = 1; f < 64; ++f)
    for (double u : {0.0, 0.3, 0.99}) EXPECT_LE(retry_delay(f, u), kRetryCapSeconds * 1.2) << f << " " << u;
}

// The moment to wake every backed-off retry: the first answer after requests went unanswered or
// got a 5xx, once per spell; any answer below 500 (a 404 or a 409 too) means the server is back.
TEST(Reachability, TheFirstAnswerAfterASpellAwayIsReportedOnce) {
  Reachability r;
  EXPECT_FALSE(r.answered(200));  // never away
  EXPECT_FALSE(r.answered(0));    // connection refused
  EXPECT_TRUE(r.unreachable());
  EXPECT_FALSE(r.answered(503));  // starting: still away
  EXPECT_TRUE(r.answered(409));   // back
  EXPECT_FALSE(r.unreachable());
  EXPECT_FALSE(r.answered(200));  // reported once
  EXPECT_FALSE(r.answered(-1));
  EXPECT_TRUE(r.answered(404));
}

}  // namespace
}  // namespace swarm::kube
