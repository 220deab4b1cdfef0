// AveragingInbox (worker/stage/averaging_inbox.h): what a step's leader sums and answers, on a
// fake clock. Pushes wait on their connection threads; here, on threads of the test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <future>
#include <thread>

#include "worker/stage/averaging_inbox.h"
#include "worker/net/errors.h"
#include "worker/runtime/protocol.h"
#include "tests/stage/fake_clock.h"

namespace swarm::runtime {
namespace {

constexpr double kStart = 10;  // the fake clock's first reading

Contribution push(const std::string& peer, int64_t samples, torch::Tensor flat) {
  return Contribution{peer, samples, std::move(flat)};
}

TEST(AveragingInbox, ALeaderPastItsDeadlineSumsWhatArrived) {
  FakeClock c(kStart);
  AveragingInbox inbox(c.clock());
  const auto own = torch::full({3}, 1.0f);
  // Deadline already passed: no wait, its own gradient alone.
  auto r = inbox.gather({4, 0}, {"a", "b"}, own, 5, /*deadline=*/c.now - 1);
  EXPECT_EQ(r->members, 1);
  EXPECT_EQ(r->samples, 5);
  EXPECT_TRUE(r->average.equal(own));
  EXPECT_NE(r->average.data_ptr(), own.data_ptr());  // a copy: the leader's gradient stays its own
}

TEST(AveragingInbox, TheLeaderWaitsForEveryMemberAndAnswersEachPushWithTheSum) {
  FakeClock c(kStart);
  AveragingInbox inbox(c.clock());
  const AveragingInbox::Key key{7, 1};
  auto b = std::async(std::launch::async, [&] {
    return inbox.contribute(key, push("b", 2, torch::full({3}, 2.0f)), false, 60);
  });
  auto d = std::async(std::launch::async, [&] {
    return inbox.contribute(key, push("d", 3, torch::full({3}, 4.0f)), false, 60);
  });
  // The deadline is far: the leader returns because both members pushed.
  auto r = inbox.gather(key, {"a", "b", "d"}, torch::full({3}, 1.0f), 1, c.now + 600);
  EXPECT_EQ(r->members, 3);
  EXPECT_EQ(r->samples, 6);
  EXPECT_TRUE(r->average.equal(torch::full({3}, 7.0f)));
  EXPECT_EQ(b.get(), r);
  EXPECT_EQ(d.get(), r);
}

TEST(AveragingInbox, APushOfTheWrongSizeIsLeftOut) {
  FakeClock c(kStart);
  AveragingInbox inbox(c.clock());
  auto bad = std::async(std::launch::async, [&] {
    return inbox.contribute({1, 0}, push("b", 9, torch::ones({5})), false, 60);
  });
  auto r = inbox.gather({1, 0}, {"a", "b"}, torch::ones({3}), 1, c.now + 600);
  EXPECT_EQ(r->members, 1);
  EXPECT_EQ(r->samples, 1);
  EXPECT_EQ(bad.get(), r);  // answered all the same
}

TEST(AveragingInbox, ALatePushGetsThePublishedResultOrStepClosed) {
  FakeClock c(kStart);
  AveragingInbox inbox(c.clock());
  auto r = inbox.gather({3, 0}, {"a", "b"}, torch::ones({2}), 4, c.now);
  // The leader stepped past step 3: a push for it still gets the step's result ...
  EXPECT_EQ(inbox.contribute({3, 0}, push("b", 1, torch::ones({2})), true, 60), r);
  // ... but one for an attempt that has none is refused.
  try {
    inbox.contribute({3, 1}, push("b", 1, torch::ones({2})), true, 60);
    ADD_FAILURE() << "a push for a closed step was taken";
  } catch (const net::CodedError& e) {
    EXPECT_EQ(e.code(), net::ErrorCode::StepClosed);  // the member's client reads the code
    EXPECT_EQ(std::string(e.what()), kStepClosed);
  }
}

TEST(AveragingInbox, PruneDropsStepsMoreThanTwoBehind) {
  FakeClock c(kStart);
  AveragingInbox inbox(c.clock());
  inbox.gather({3, 0}, {"a"}, torch::ones({2}), 1, c.now);
  inbox.gather({4, 0}, {"a"}, torch::ones({2}), 1, c.now);
  inbox.prune(6);  // 3 + 2 < 6: step 3 goes, step 4 stays
  EXPECT_THROW(inbox.contribute({3, 0}, push("b", 1, torch::ones({2})), true, 60), std::runtime_error);
  EXPECT_NO_THROW(inbox.contribute({4, 0}, push("b", 1, torch::ones({2})), true, 60));
}

TEST(AveragingInbox, StopAnswersAWaitingPushWithAnError) {
  FakeClock c(kStart);
  AveragingInbox inbox(c.clock());
  std::promise<void> filed;
  auto waiting = std::async(std::launch::async, [&] {
    filed.set_value();
    return inbox.contribute({2, 0}, push("b", 1, torch::ones({2})), false, 600);
  });
  filed.get_future().wait();
  inbox.stop();
  try {
    waiting.get();
    ADD_FAILURE() << "a push was answered after stop";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "averaging step 2 timed out at the leader");
  }
  // And one that comes after the stop does not wait.
  EXPECT_THROW(inbox.contribute({2, 1}, push("c", 1, torch::ones({2})), false, 600), std::runtime_error);
}

}  // namespace
}  // namespace swarm::runtime
