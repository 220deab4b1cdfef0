#include "planner/step_book.h"

#include <gtest/gtest.h>

#include "tests/planner/step_book_helpers.h"

namespace swarm::planner {
namespace {

using namespace book_testing;

TEST(StepBookProgress, SumsLatestValuePerPeer) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  ProgressView v = book.report_progress(0, 3, "a", 10, 100, t, 1);
  EXPECT_EQ(v.step, 3);
  EXPECT_EQ(v.samples_total, 10);
  EXPECT_EQ(v.target, 100);
  EXPECT_FALSE(v.target_reached);

  v = book.report_progress(0, 3, "b", 20, 100, t, 1);
  EXPECT_EQ(v.samples_total, 30);
  // Running totals: the latest value replaces, it does not add.
  v = book.report_progress(0, 3, "a", 15, 100, t, 2);
  EXPECT_EQ(v.samples_total, 35);
  v = book.report_progress(0, 3, "a", 15, 100, t, 2);  // idempotent
  EXPECT_EQ(v.samples_total, 35);
  EXPECT_FALSE(v.target_reached);
}

TEST(StepBookProgress, AdmittedWorkCountsTowardsTheTarget) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  // a finished 8 samples and holds 24 more in flight; b finished 16 and holds 8.
  auto v = book.report_progress(0, 1, "a", 8, 64, t, 0, 32);
  EXPECT_EQ(v.samples_total, 32);
  EXPECT_FALSE(v.target_reached);
  v = book.report_progress(0, 1, "b", 16, 64, t, 0, 24);
  EXPECT_EQ(v.samples_total, 56);
  v = book.report_progress(0, 1, "b", 16, 64, t, 0, 32);
  EXPECT_EQ(v.samples_total, 64);
  EXPECT_TRUE(v.target_reached);  // admitted work covers the batch: stop admitting, finish, average
  // admitted below samples (or absent) reads as samples.
  v = book.report_progress(0, 2, "a", 10, 64, t, 0, 3);
  EXPECT_EQ(v.samples_total, 10);
  v = book.report_progress(0, 2, "b", 5, 64, t, 0);
  EXPECT_EQ(v.samples_total, 15);
  // A dead peer's lost work is what it had done, not what it had admitted.
  book.report_progress(0, 3, "a", 8, 64, t, 0, 40);
  EXPECT_EQ(book.abandon(0, "a"), 8);
}

TEST(StepBookProgress, StagesAndStepsAreSeparate) {
  PeerTable t = table_with({"a", "b"});
  t.upsert(worker("c", 1), 0);
  StepBook book;
  book.report_progress(0, 3, "a", 10, 100, t, 1);
  EXPECT_EQ(book.report_progress(0, 4, "b", 7, 100, t, 1).samples_total, 7);
  EXPECT_EQ(book.report_progress(1, 3, "c", 5, 100, t, 1).samples_total, 5);
  EXPECT_EQ(book.report_progress(0, 3, "b", 1, 100, t, 1).samples_total, 11);
}

// A peer's claim is its part of the step until it releases it: a peer that dies keeps it (what it
// owed is retried on the others and moves to them), so the step stays full for everyone.
TEST(StepBookProgress, AFullStepStaysFullWhenAPeerDies) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.report_progress(0, 0, "a", 60, 100, t, 1);
  ProgressView v = book.report_progress(0, 0, "b", 40, 100, t, 1);
  EXPECT_EQ(v.samples_total, 100);
  EXPECT_TRUE(v.target_reached);

  // b dies (its record expires): its claim stays.
  t.upsert(worker("a", 0), 5);
  v = book.report_progress(0, 0, "a", 60, 100, t, 10.5);
  EXPECT_EQ(v.samples_total, 100);
  EXPECT_TRUE(v.target_reached);
  // A later step starts fresh.
  EXPECT_FALSE(book.report_progress(0, 1, "a", 0, 100, t, 10.5).target_reached);
}

TEST(StepBookProgress, EveryReportCountsWhetherItsPeerIsListedOrNot) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.report_progress(0, 0, "a", 30, 100, t, 1);
  EXPECT_EQ(book.report_progress(0, 0, "b", 20, 100, t, 1).samples_total, 50);
  t.remove("a");
  EXPECT_EQ(book.report_progress(0, 0, "b", 21, 100, t, 12).samples_total, 51);
  // A peer the registry has not heard announce yet (a registry restarted a moment ago) reports
  // its counts: facts, counted, so nobody else is granted them again.
  EXPECT_EQ(book.report_progress(0, 0, "late", 9, 100, t, 12).samples_total, 60);
  // A report of 0 (a peer that settled its gradient elsewhere) takes its part out.
  EXPECT_EQ(book.report_progress(0, 0, "late", 0, 100, t, 12).samples_total, 51);
}


TEST(StepBookGroup, UnknownUntilFirstJoin) {
  PeerTable t = table_with({"a"});
  StepBook book;
  GroupView g = book.group(0, 0, 0, t, 0);
  EXPECT_EQ(g.state, GroupView::Unknown);
  EXPECT_TRUE(g.members.empty());
  EXPECT_EQ(g.leader, "");
  EXPECT_STREQ(to_string(g.state), "unknown");
}

TEST(StepBookGroup, ReadyWhenAllLiveWorkersJoined) {
  PeerTable t = table_with({"c", "a", "b"});
  t.upsert(worker("other-stage", 1), 0);
  PeerRecord tr;
  tr.peer_id = "trainer";
  tr.role = "trainer";
  t.upsert(tr, 0);
  StepBook book;
  EXPECT_EQ(book.join(0, 2, 0, member("c", 3), 30, 1), JoinResult::Joined);
  EXPECT_EQ(book.join(0, 2, 0, member("a", 1), 30, 1.1), JoinResult::Joined);
  GroupView g = book.group(0, 2, 0, t, 1.2);
  EXPECT_EQ(g.state, GroupView::Gathering);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "c"}));

  EXPECT_EQ(book.join(0, 2, 0, member("b", 2), 30, 1.3), JoinResult::Joined);
  g = book.group(0, 2, 0, t, 1.4);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_STREQ(to_string(g.state), "ready");
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(g.leader, "a");  // smallest id leads
  EXPECT_EQ(g.members[2].samples, 3);
  EXPECT_EQ(g.members[2].host, "h-c");
}

TEST(StepBookGroup, ADrainingPeerDoesNotHoldTheGroupOpen) {
  PeerTable t = table_with({"a", "b"});
  PeerRecord leaving = worker("b", 0);
  leaving.state = PeerState::Draining;  // moved by the rebalancer or preempted: it hands off instead
  t.upsert(leaving, 0);
  StepBook book;
  EXPECT_EQ(book.join(0, 1, 0, member("a", 8), 30, 1), JoinResult::Joined);
  GroupView g = book.group(0, 1, 0, t, 1.1);  // long before the 30-s window ends
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a"}));
  // The same peer serving would have been waited for.
  t.upsert(worker("b", 0), 0);
  EXPECT_EQ(book.join(0, 2, 0, member("a", 8), 30, 1), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 2, 0, t, 1.1).state, GroupView::Gathering);
}

// A draining peer that admitted samples this step holds a gradient the stage counted toward
// the target: the group waits for it (it joins on its way out), so its samples are averaged
// instead of handed to a peer that is already averaging without them.
TEST(StepBookGroup, ADrainingPeerHoldingSamplesOfTheStepIsWaitedFor) {
  PeerTable t = table_with({"a", "b"});
  PeerRecord leaving = worker("b", 0);
  leaving.state = PeerState::Draining;
  t.upsert(leaving, 0);
  StepBook book;
  book.report_progress(0, 1, "a", 8, 16, t, 1);
  book.report_progress(0, 1, "b", 8, 16, t, 1);
  EXPECT_EQ(book.join(0, 1, 0, member("a", 8), 30, 1), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 1, 0, t, 1.1).state, GroupView::Gathering);
  EXPECT_EQ(book.join(0, 1, 0, member("b", 8), 30, 1.2), JoinResult::Joined);
  GroupView g = book.group(0, 1, 0, t, 1.3);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b"}));
  // Once it settled its gradient elsewhere (it reports 0 admitted; the taker holds its samples),
  // it is no longer waited for.
  book.report_progress(0, 2, "a", 16, 16, t, 2);
  book.report_progress(0, 2, "b", 0, 16, t, 2);
  EXPECT_EQ(book.join(0, 2, 0, member("a", 8), 30, 2), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 2, 0, t, 2.1).state, GroupView::Ready);
}

// A joining peer (state download in progress, from a peer of this very group) and a failed peer
// hold no gradient: the group does not wait for them. Seen on a cluster: a reclaimed worker's
// replacement, joining, held its stage's step for the 15-s window while its state request sat
// queued behind that step on the donor.
TEST(StepBookGroup, AJoiningOrFailedPeerDoesNotHoldTheGroupOpen) {
  for (PeerState state : {PeerState::Joining, PeerState::Failed}) {
    SCOPED_TRACE(to_string(state));
    PeerTable t = table_with({"a", "b"});
    PeerRecord newcomer = worker("b", 0);
    newcomer.state = state;
    t.upsert(newcomer, 0);
    StepBook book;
    EXPECT_EQ(book.join(0, 1, 0, member("a", 16), 30, 1), JoinResult::Joined);
    GroupView g = book.group(0, 1, 0, t, 1.1);
    EXPECT_EQ(g.state, GroupView::Ready);
    EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a"}));
    // Once serving, it is waited for.
    t.upsert(worker("b", 0), 0);
    EXPECT_EQ(book.join(0, 2, 0, member("a", 16), 30, 1), JoinResult::Joined);
    EXPECT_EQ(book.group(0, 2, 0, t, 1.1).state, GroupView::Gathering);
  }
}

// A newcomer serves before the registry hears its next heartbeat: still "joining" there, it has
// already reported samples of the step. Leaving it out would close the step on its gradient
// (a re-sync, samples lost: FaultMatrix.WorkersGivenAReclaimNoticeMidStepLoseNoSample).
TEST(StepBookGroup, AJoiningPeerThatReportedSamplesOfTheStepIsWaitedFor) {
  PeerTable t = table_with({"a", "b"});
  PeerRecord newcomer = worker("b", 0);
  newcomer.state = PeerState::Joining;
  t.upsert(newcomer, 0);
  StepBook book;
  book.report_progress(0, 1, "a", 60, 64, t, 1);
  book.report_progress(0, 1, "b", 4, 64, t, 1);
  EXPECT_EQ(book.join(0, 1, 0, member("a", 16), 30, 1), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 1, 0, t, 1.1).state, GroupView::Gathering);
  EXPECT_EQ(book.join(0, 1, 0, member("b", 4), 30, 1.2), JoinResult::Joined);
  GroupView g = book.group(0, 1, 0, t, 1.3);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b"}));
  // A failed peer is not waited for even with samples reported: it will not average.
  PeerRecord failed = worker("b", 0);
  failed.state = PeerState::Failed;
  t.upsert(failed, 2);
  book.report_progress(0, 2, "a", 60, 64, t, 2);
  book.report_progress(0, 2, "b", 4, 64, t, 2);
  EXPECT_EQ(book.join(0, 2, 0, member("a", 16), 30, 2), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 2, 0, t, 2.1).state, GroupView::Ready);
}

// No stage steps on fewer samples than its global batch: a group whose step is not full stays
// gathering, past its window too, and tells its members so (they go back to admitting work).
TEST(StepBookGroup, AStepThatIsNotFullNeverCloses) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.claim(0, 0, "a", ask(8, 8, 8), 32, t, 0);
  book.claim(0, 0, "b", ask(8, 8, 8), 32, t, 0);
  book.join(0, 0, 0, member("a", 8), 5, 0);
  book.join(0, 0, 0, member("b", 8), 5, 0);
  GroupView g = book.group(0, 0, 0, t, 9);
  EXPECT_EQ(g.state, GroupView::Gathering);
  EXPECT_FALSE(g.step_full);
  // It fills at t=9: the window runs from then on, not from the first join.
  book.claim(0, 0, "a", ask(8, 24, 24), 32, t, 9);
  t.upsert(worker("a", 0), 9);
  t.upsert(worker("b", 0), 9);
  book.join(0, 0, 0, member("a", 24), 5, 9.1);
  g = book.group(0, 0, 0, t, 9.2);
  EXPECT_TRUE(g.step_full);
  EXPECT_EQ(g.state, GroupView::Ready);  // both joined
  // With b not joined, the window (5 s from t=9) decides.
  book.claim(0, 1, "a", ask(0, 16, 16), 32, t, 10);
  book.claim(0, 1, "b", ask(0, 8, 8), 32, t, 10);
  book.join(0, 1, 0, member("a", 16), 5, 10);
  book.claim(0, 1, "b", ask(0, 16, 16), 32, t, 12);
  EXPECT_EQ(book.group(0, 1, 0, t, 16.9).state, GroupView::Gathering);
  EXPECT_EQ(book.join(0, 1, 0, member("b", 16), 5, 16.95), JoinResult::Joined);
}

// A peer that drops activations whose backward never came (their trainer was killed) gives their
// claim back, and work already waiting at it takes the claim in the same report: the registry
// never sees the step not full, yet it was. The gather window starts again from that report, so
// the peer that joined long before is not averaged without the one that holds the rest of the step
// (it would re-sync and lose its samples).
TEST(StepBookGroup, WorkGivenBackAndRetakenInOneReportRestartsTheWindow) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.claim(0, 0, "a", ask(16, 16, 16), 32, t, 0);
  book.claim(0, 0, "b", ask(0, 16, 16), 32, t, 0);  // 16 owed a backward
  EXPECT_EQ(book.join(0, 0, 0, member("a", 16), 5, 0.1), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 0, 0, t, 2).state, GroupView::Gathering);  // b has not joined
  // At t=2.5 b drops its 16 and admits 8 of a new trainer's work at once: used 16 -> 8 -> 16.
  const auto v = book.claim(0, 0, "b", ask(0, 8, 16), 32, t, 2.5);
  EXPECT_TRUE(v.target_reached);
  EXPECT_EQ(v.granted, 16);
  t.upsert(worker("a", 0), 4);
  t.upsert(worker("b", 0), 4);
  // Past 5 s from the first join, the window (5 s from t=2.5) still runs.
  EXPECT_EQ(book.group(0, 0, 0, t, 6).state, GroupView::Gathering);
  // The new work's backward came: b is done with its 16 and joins.
  EXPECT_TRUE(book.claim(0, 0, "b", ask(16, 16, 16), 32, t, 6.2).target_reached);
  EXPECT_EQ(book.join(0, 0, 0, member("b", 16), 5, 6.5), JoinResult::Joined);
  const auto g = book.group(0, 0, 0, t, 6.6);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b"}));
  // A report that gives nothing back leaves the window where it was: it passes at t=7.5.
  book.claim(0, 1, "a", ask(16, 16, 16), 32, t, 7);
  book.claim(0, 1, "b", ask(0, 16, 16), 32, t, 7);
  book.join(0, 1, 0, member("a", 16), 5, 7);
  book.claim(0, 1, "b", ask(8, 16, 16), 32, t, 9);
  EXPECT_EQ(book.group(0, 1, 0, t, 12.1).state, GroupView::Ready);
}

// A peer killed mid-step owed work its trainers retry on the live peers: the group waits for
// them to take it over (kRetrySeconds) and says whom it awaits.
TEST(StepBookGroup, AGroupAwaitsTheRetriesOfAGonePeersOwedWork) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  book.claim(0, 0, "a", ask(12, 12, 12), 32, t, 1);
  book.claim(0, 0, "b", ask(12, 12, 12), 32, t, 1);
  book.claim(0, 0, "c", ask(0, 8, 8), 32, t, 1);  // 8 owed
  book.abandon(0, "c", 2);
  t.remove("c");
  book.join(0, 0, 0, member("a", 12), 10, 2);
  book.join(0, 0, 0, member("b", 12), 10, 2);
  GroupView g = book.group(0, 0, 0, t, 2.1);
  EXPECT_EQ(g.state, GroupView::Gathering);
  EXPECT_EQ(g.awaiting, (std::vector<std::string>{"c"}));
  // b takes both retries over, computes them and joins again.
  book.claim(0, 0, "b", ask(12, 12, 20, 4, {{"c", 4}, {"c", 4}}), 32, t, 2.2);
  g = book.group(0, 0, 0, t, 2.25);
  EXPECT_TRUE(g.awaiting.empty());
  EXPECT_EQ(g.state, GroupView::Gathering);  // b holds 8 it has not yet done
  book.claim(0, 0, "b", ask(20, 20, 20), 32, t, 2.3);
  book.join(0, 0, 0, member("b", 20), 10, 2.3);
  g = book.group(0, 0, 0, t, 2.35);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(g.unretried, 0);  // every owed sample was taken over
  // Retries that never come (the trainer gave the microbatch up) hold the step kRetrySeconds.
  book.claim(0, 1, "a", ask(12, 12, 12), 32, t, 3);
  book.claim(0, 1, "b", ask(12, 20, 20), 32, t, 3);
  book.abandon(0, "b", 4);
  t.remove("b");
  book.join(0, 1, 0, member("a", 12), 10, 4);
  EXPECT_EQ(book.group(0, 1, 0, t, 4 + StepBook::kRetrySeconds - 0.1).state, GroupView::Gathering);
  g = book.group(0, 1, 0, t, 4 + StepBook::kRetrySeconds);
  EXPECT_EQ(g.state, GroupView::Ready);
  // The step closed without b's 8 owed samples: said once, by the call that froze the group.
  EXPECT_EQ(g.unretried, 8);
  EXPECT_EQ(book.group(0, 1, 0, t, 4 + StepBook::kRetrySeconds + 1).unretried, 0);
}

TEST(StepBookGroup, ReadyAfterTimeoutWithoutTheMissingPeer) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  book.join(0, 0, 0, member("b"), 5, 1);
  book.join(0, 0, 0, member("c"), 99, 2);  // the first join fixed the window
  EXPECT_EQ(book.group(0, 0, 0, t, 5.9).state, GroupView::Gathering);
  GroupView g = book.group(0, 0, 0, t, 6);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(g.leader, "b");
}

TEST(StepBookGroup, LateJoinGetsClosedAndReadyIsImmutable) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.join(0, 0, 0, member("a"), 5, 0);
  book.join(0, 0, 0, member("b"), 5, 0);
  ASSERT_EQ(book.group(0, 0, 0, t, 0.5).state, GroupView::Ready);

  t.upsert(worker("z", 0), 1);
  EXPECT_EQ(book.join(0, 0, 0, member("z"), 5, 1), JoinResult::Closed);
  // A member retrying its join is told it is in.
  EXPECT_EQ(book.join(0, 0, 0, member("a"), 5, 1), JoinResult::Joined);
  // Members stay frozen even when one of them dies afterwards.
  GroupView g = book.group(0, 0, 0, t, 20);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b"}));
}

TEST(StepBookGroup, JoinAfterWindowIsClosedEvenBeforeAnyoneLooks) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  book.join(0, 0, 0, member("a"), 5, 0);
  EXPECT_EQ(book.join(0, 0, 0, member("b"), 5, 5), JoinResult::Closed);
  GroupView g = book.group(0, 0, 0, t, 6);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a"}));
}

TEST(StepBookGroup, DeadJoinerIsLeftOutAndDoesNotBlock) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.join(0, 0, 0, member("a"), 60, 0);
  t.upsert(worker("a", 0), 9);
  book.join(0, 0, 0, member("b"), 60, 9);
  // At t=11 b has expired (last seen 0): every live worker (a) has joined; members = live only.
  GroupView g = book.group(0, 0, 0, t, 11);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a"}));
}

TEST(StepBookGroup, AttemptsAreSeparateGroups) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  book.join(0, 0, 0, member("a"), 5, 0);
  book.join(0, 0, 0, member("b"), 5, 0);
  ASSERT_EQ(book.group(0, 0, 0, t, 5).state, GroupView::Ready);
  // The all-reduce of attempt 0 failed; everybody retries with attempt 1.
  EXPECT_EQ(book.join(0, 0, 1, member("c"), 5, 6), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 0, 1, t, 6).state, GroupView::Gathering);
  EXPECT_EQ(book.join(0, 0, 1, member("a"), 5, 6), JoinResult::Joined);
  EXPECT_EQ(book.join(0, 0, 1, member("b"), 5, 6), JoinResult::Joined);
  GroupView g1 = book.group(0, 0, 1, t, 6);
  EXPECT_EQ(g1.state, GroupView::Ready);
  EXPECT_EQ(ids(g1.members), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ids(book.group(0, 0, 0, t, 6).members), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(book.group(0, 0, 2, t, 6).state, GroupView::Unknown);
}

TEST(StepBookGroup, SinglePeerStage) {
  PeerTable t = table_with({"solo"});
  StepBook book;
  EXPECT_EQ(book.join(0, 0, 0, member("solo", 42), 30, 0), JoinResult::Joined);
  GroupView g = book.group(0, 0, 0, t, 0);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"solo"}));
  EXPECT_EQ(g.leader, "solo");
  EXPECT_EQ(g.members[0].samples, 42);
}

TEST(StepBookGroup, WorkersOfOtherStagesDoNotBlock) {
  PeerTable t = table_with({"a"});
  t.upsert(worker("b", 1), 0);
  StepBook book;
  book.join(1, 0, 0, member("b"), 30, 0);
  EXPECT_EQ(book.group(1, 0, 0, t, 0).state, GroupView::Ready);
  book.join(0, 0, 0, member("a"), 30, 0);
  EXPECT_EQ(ids(book.group(0, 0, 0, t, 0).members), (std::vector<std::string>{"a"}));
}

// A registry restarted mid-averaging: a member that saw the group Ready re-tells it; the new
// book gives everyone that group, whoever asks first.
TEST(StepBookRestore, AGroupTheBookLostComesBackReadyWithTheToldMembers) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  GroupView v = book.restore(0, 7, 0, {member("b", 12), member("a", 20)}, 3);
  EXPECT_EQ(v.state, GroupView::Ready);
  EXPECT_EQ(ids(v.members), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v.leader, "a");
  EXPECT_EQ(v.members[0].samples, 20);
  // A member that had not seen it joins again: it is in. "c" was not in the group: closed.
  EXPECT_EQ(book.join(0, 7, 0, member("a"), 5, 3.1), JoinResult::Joined);
  EXPECT_EQ(book.join(0, 7, 0, member("c"), 5, 3.1), JoinResult::Closed);
  GroupView g = book.group(0, 7, 0, t, 3.2);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(book.newest_step(0), 7);
}

TEST(StepBookRestore, AGatheringGroupTakesTheToldMembersAndClosesToOthers) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  // The new registry heard "a" join again first (it had not seen the old group Ready) and "c",
  // which was not in the old group.
  EXPECT_EQ(book.join(0, 7, 0, member("a"), 5, 0), JoinResult::Joined);
  EXPECT_EQ(book.join(0, 7, 0, member("c"), 5, 0), JoinResult::Joined);
  EXPECT_EQ(book.group(0, 7, 0, t, 0.1).state, GroupView::Gathering);
  GroupView v = book.restore(0, 7, 0, {member("a"), member("b")}, 0.2);
  EXPECT_EQ(ids(v.members), (std::vector<std::string>{"a", "b"}));
  GroupView g = book.group(0, 7, 0, t, 0.3);
  EXPECT_EQ(g.state, GroupView::Ready);
  EXPECT_EQ(ids(g.members), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(book.join(0, 7, 0, member("c"), 5, 0.4), JoinResult::Closed);
}

TEST(StepBookRestore, AReadyGroupKeepsItsMembers) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.join(0, 3, 0, member("a"), 5, 0);
  book.join(0, 3, 0, member("b"), 5, 0);
  ASSERT_EQ(book.group(0, 3, 0, t, 0).state, GroupView::Ready);
  GroupView v = book.restore(0, 3, 0, {member("a")}, 1);
  EXPECT_EQ(ids(v.members), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ids(book.group(0, 3, 0, t, 1).members), (std::vector<std::string>{"a", "b"}));
}

TEST(StepBookRestore, GarbageStepsAndEmptyGroupsAreNotRestored) {
  PeerTable t = table_with({"a"});
  StepBook book;
  book.join(0, 20, 0, member("a"), 5, 0);
  EXPECT_EQ(book.restore(0, 20 - StepBook::kStepsKept, 0, {member("a")}, 0).state, GroupView::Unknown);
  EXPECT_EQ(book.group(0, 20 - StepBook::kStepsKept, 0, t, 0).state, GroupView::Unknown);
  EXPECT_EQ(book.restore(0, 21, 0, {}, 0).state, GroupView::Unknown);
  EXPECT_EQ(book.group(0, 21, 0, t, 0).state, GroupView::Unknown);
}

TEST(StepBookAbandon, UnaveragedSamplesOfTheNewestReportedStepAreReturnedOnce) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.report_progress(0, 3, "a", 8, 64, t, 0);
  book.report_progress(0, 4, "a", 12, 64, t, 0);  // the newest step a reported in counts
  book.report_progress(0, 4, "b", 20, 64, t, 0);
  EXPECT_EQ(book.abandon(0, "a"), 12);
  EXPECT_EQ(book.abandon(0, "a"), 8);   // then the step before (a never averaged it either)
  EXPECT_EQ(book.abandon(0, "a"), 0);   // nothing left: counted once
  EXPECT_EQ(book.abandon(1, "b"), 0);   // another stage
  EXPECT_EQ(book.abandon(0, "zz"), 0);  // never reported
  // The abandoned report's claim stays in the total (what it owed is retried by others).
  EXPECT_EQ(book.report_progress(0, 4, "b", 20, 64, t, 0).samples_total, 32);
}

TEST(StepBookAbandon, MembersOfTheNewestReadyGroupLostNothing) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  for (const char* id : {"a", "b", "c"}) book.report_progress(0, 2, id, 10, 30, t, 0);
  // Attempt 0 froze with a and b; attempt 1 (a retry) froze with b only.
  ASSERT_EQ(book.join(0, 2, 0, member("a"), 1, 0), JoinResult::Joined);
  ASSERT_EQ(book.join(0, 2, 0, member("b"), 1, 0), JoinResult::Joined);
  ASSERT_EQ(book.group(0, 2, 0, t, 2).state, GroupView::Ready);
  ASSERT_EQ(book.join(0, 2, 1, member("b"), 1, 2), JoinResult::Joined);
  ASSERT_EQ(book.group(0, 2, 1, t, 4).state, GroupView::Ready);
  EXPECT_EQ(book.abandon(0, "b"), 0);   // in the newest ready group: averaged
  EXPECT_EQ(book.abandon(0, "a"), 10);  // only in a superseded attempt
  EXPECT_EQ(book.abandon(0, "c"), 10);  // never joined
  // A peer still gathering (group not ready) has not averaged either.
  book.report_progress(0, 3, "a", 5, 30, t, 5);
  ASSERT_EQ(book.join(0, 3, 0, member("a"), 10, 5), JoinResult::Joined);
  EXPECT_EQ(book.abandon(0, "a"), 5);
}

TEST(StepBookGc, KeepsNewestFiveStepsPerStage) {
  PeerTable t = table_with({"a"});
  t.upsert(worker("b", 1), 0);
  StepBook book;
  for (int64_t r = 0; r <= 6; ++r) book.report_progress(0, r, "a", 1, 100, t, 0);
  book.join(1, 0, 0, member("b"), 5, 0);
  EXPECT_EQ(book.steps(0), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(book.newest_step(0), 6);
  EXPECT_EQ(book.steps(1), (std::vector<int64_t>{0}));  // other stages untouched
  EXPECT_EQ(book.newest_step(7), -1);

  // Out-of-order reports inside the window are fine and do not move the window.
  EXPECT_EQ(book.report_progress(0, 2, "a", 5, 100, t, 0).samples_total, 5);
  EXPECT_EQ(book.steps(0).front(), 2);

  // Garbage steps: finished as far as the book is concerned, and nothing is recreated.
  ProgressView v = book.report_progress(0, 1, "a", 5, 100, t, 0);
  EXPECT_TRUE(v.target_reached);
  EXPECT_EQ(v.samples_total, 0);
  EXPECT_EQ(book.join(0, 1, 0, member("a"), 5, 0), JoinResult::Closed);
  EXPECT_EQ(book.group(0, 1, 0, t, 0).state, GroupView::Unknown);
  EXPECT_EQ(book.steps(0), (std::vector<int64_t>{2, 3, 4, 5, 6}));

  // A jump collects everything behind the new window, groups included.
  book.join(0, 3, 0, member("a"), 5, 0);
  book.join(0, 100, 0, member("a"), 5, 0);
  EXPECT_EQ(book.steps(0), (std::vector<int64_t>{100}));
  EXPECT_EQ(book.group(0, 3, 0, t, 0).state, GroupView::Unknown);
}

}  // namespace
}  // namespace swarm::planner
