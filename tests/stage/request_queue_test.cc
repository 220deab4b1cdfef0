// RequestQueue (worker/stage/request_queue.h): the order the compute thread takes requests in,
// and the requests it refuses, with the reason, on a fake clock.
#include <gtest/gtest.h>

#include "worker/runtime/protocol.h"
#include "worker/stage/request_queue.h"
#include "tests/stage/fake_clock.h"

namespace swarm::runtime {
namespace {

constexpr double kStart = 100;  // the fake clock's first reading

std::shared_ptr<Task> task(uint16_t type, uint64_t id, bool eval = false) {
  auto t = std::make_shared<Task>();
  t->request.type = type;
  t->request.request_id = id;
  t->meta = {{"stage", 0}, {"samples", 4}, {"mb", "mb" + std::to_string(id)}};
  if (eval) t->meta["eval"] = true;
  return t;
}

std::string error_of(Task& t) {
  auto reply = t.reply.get_future().get();
  EXPECT_EQ(reply.type, net::Error);
  return net::error_text(reply);
}

TEST(RequestQueue, RefusesSampleCountsPastItsLimitAndSaysWhy) {
  EXPECT_NO_THROW(RequestQueue::check_samples(1));
  EXPECT_NO_THROW(RequestQueue::check_samples(RequestQueue::kMaxSamplesPerRequest));
  for (int64_t bad : {int64_t{0}, int64_t{-3}, RequestQueue::kMaxSamplesPerRequest + 1}) {
    try {
      RequestQueue::check_samples(bad);
      ADD_FAILURE() << bad << " samples were accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "meta.samples: must be in [1, 65536], got " + std::to_string(bad));
    }
  }
}

TEST(RequestQueue, StampsEachRequestWithTheClock) {
  FakeClock c(kStart);
  RequestQueue q(c.clock());
  auto t = task(net::Forward, 1);
  q.push(t);
  EXPECT_EQ(t->enqueued_at, 100);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_FALSE(q.empty());
}

TEST(RequestQueue, RefusesForwardsThatWaitedPastTheirCallersTimeoutAndSaysWhy) {
  FakeClock c(kStart);
  RequestQueue q(c.clock());
  TimeoutsSpec to;
  to.forward_seconds = 10;
  to.backward_seconds = 20;
  auto fwd = task(net::Forward, 1), fb = task(net::ForwardBackward, 2), bwd = task(net::Backward, 3);
  for (const auto& t : {fwd, fb, bwd}) q.push(t);
  c.now += 9;  // exactly 90 % of the forward timeout: not past it
  EXPECT_TRUE(q.expire_waiting(to).empty());
  c.now += 0.5;
  EXPECT_EQ(q.expire_waiting(to), std::vector<uint16_t>{net::Forward});
  EXPECT_EQ(error_of(*fwd),
            "waited 9.5 s in the queue, past its caller's timeout (spec.timeouts.forwardSeconds 10): not computed");
  c.now += 18;  // forward_backward: 90 % of forward + backward (27 s)
  EXPECT_EQ(q.expire_waiting(to), std::vector<uint16_t>{net::ForwardBackward});
  EXPECT_NE(error_of(*fb).find("waited 27.5 s in the queue"), std::string::npos);
  // A backward has no such limit: it completes work the peer already did.
  c.now += 1000;
  EXPECT_TRUE(q.expire_waiting(to).empty());
  EXPECT_EQ(q.size(), 1u);
}

Admission admit(int64_t budget, bool leaving = false, std::set<std::string> activations = {}) {
  Admission a;
  a.leaving = leaving;
  a.budget = budget;
  a.activations = std::move(activations);
  return a;
}

// A backward that brings the stage input (a failover: the peer may recompute the forward).
std::shared_ptr<Task> with_input(std::shared_ptr<Task> t, const std::string& from = "") {
  t->request.tensors.resize(2);
  if (!from.empty()) t->meta["from"] = from;
  return t;
}

TEST(RequestQueue, TakesBackwardsFirstAndNewWorkOnlyWithinTheClaim) {
  FakeClock c(kStart);
  RequestQueue q(c.clock());
  auto fwd = task(net::Forward, 1), eval = task(net::Forward, 2, true), bwd = task(net::Backward, 3),
       state = task(net::StateRequest, 4);
  for (const auto& t : {fwd, eval, bwd, state}) q.push(t);
  bool held = true;
  EXPECT_EQ(q.take(admit(0, false, {"mb3"}), &held), bwd);
  EXPECT_FALSE(held);
  EXPECT_EQ(q.take(admit(0), &held), state);
  EXPECT_EQ(q.take(admit(0), &held), eval);  // eval forwards do not count against the step
  EXPECT_FALSE(held);
  EXPECT_TRUE(q.has_eligible(admit(4)));
  EXPECT_FALSE(q.has_eligible(admit(3)));  // a forward of 4 samples does not fit a claim of 3
  EXPECT_EQ(q.take(admit(3), &held), nullptr);
  EXPECT_TRUE(held);  // work waits for a claim
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.take(admit(4), &held), fwd);
  EXPECT_FALSE(held);
  EXPECT_EQ(q.take(admit(0), &held), nullptr);
  EXPECT_FALSE(held);  // nothing waits
  EXPECT_FALSE(q.has_eligible(admit(100, true)));
}

// A backward of activations this peer does not hold, with the input to recompute them, is work
// admitted into the step: it needs a claim, before new forwards (it finishes a microbatch under
// way); one without the input only fails (activation_missing) and is taken at once.
TEST(RequestQueue, ARecomputeNeedsAClaimAndComesBeforeNewForwards) {
  FakeClock c(kStart);
  RequestQueue q(c.clock());
  auto fwd = task(net::Forward, 1), recompute = with_input(task(net::Backward, 2), "gone-peer"),
       missing = task(net::Backward, 3), owed = with_input(task(net::Backward, 4));
  for (const auto& t : {fwd, recompute, missing, owed}) q.push(t);
  const std::set<std::string> held_here{"mb4"};
  EXPECT_TRUE(RequestQueue::needs_claim(*fwd, held_here));
  EXPECT_TRUE(RequestQueue::needs_claim(*recompute, held_here));
  EXPECT_FALSE(RequestQueue::needs_claim(*missing, held_here));
  EXPECT_FALSE(RequestQueue::needs_claim(*owed, held_here));
  EXPECT_FALSE(RequestQueue::needs_claim(*task(net::Forward, 5, true), held_here));
  const Demand d = q.demand(held_here);
  EXPECT_EQ(d.samples, 8);
  EXPECT_EQ(d.unit, 4);
  ASSERT_EQ(d.transfers.size(), 1u);  // the retry names the peer that held its work
  EXPECT_EQ(d.transfers[0].from, "gone-peer");
  EXPECT_EQ(d.transfers[0].samples, 4);
  bool held = false;
  EXPECT_EQ(q.take(admit(4, false, held_here), &held), missing);
  EXPECT_EQ(q.take(admit(4, false, held_here), &held), owed);
  EXPECT_EQ(q.take(admit(4, false, held_here), &held), recompute);
  EXPECT_EQ(q.take(admit(0, false, held_here), &held), nullptr);
  EXPECT_TRUE(held);
  EXPECT_EQ(q.demand(held_here).samples, 4);
  EXPECT_TRUE(q.demand(held_here).transfers.empty());
}

TEST(RequestQueue, ALeavingPeerTakesItsForwardsToAnswerThem) {
  FakeClock c(kStart);
  RequestQueue q(c.clock());
  auto fwd = task(net::Forward, 1);
  q.push(fwd);
  EXPECT_TRUE(q.has_eligible(admit(0, true)));
  bool held = true;
  EXPECT_EQ(q.take(admit(0, true), &held), fwd);
  EXPECT_FALSE(held);
}

TEST(RequestQueue, FailAllAnswersEveryQueuedRequest) {
  FakeClock c(kStart);
  RequestQueue q(c.clock());
  auto a = task(net::Forward, 1), b = task(net::Backward, 2);
  q.push(a);
  q.push(b);
  q.fail_all("worker is stopping");
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(error_of(*a), "worker is stopping");
  EXPECT_EQ(error_of(*b), "worker is stopping");
}

}  // namespace
}  // namespace swarm::runtime
