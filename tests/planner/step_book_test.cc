#include "planner/step_book.h"

#include <gtest/gtest.h>

namespace swarm::planner {
namespace {

constexpr double kExpiry = 10;

PeerRecord worker(const std::string& id, int stage) {
  PeerRecord r;
  r.peer_id = id;
  r.role = "worker";
  r.stage = stage;
  r.host = "h-" + id;
  r.port = 7000;
  r.state = PeerState::Serving;
  return r;
}

Member member(const std::string& id, int64_t samples = 0) {
  return Member{id, "h-" + id, 7000, samples};
}

std::vector<std::string> ids(const std::vector<Member>& v) {
  std::vector<std::string> out;
  for (const auto& m : v) out.push_back(m.peer_id);
  return out;
}

// A stage-0 table with the given workers, all announced at t=0.
PeerTable table_with(std::initializer_list<const char*> workers, int stage = 0) {
  PeerTable t(kExpiry);
  for (const char* w : workers) t.upsert(worker(w, stage), 0);
  return t;
}

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

ClaimRequest ask(int64_t done, int64_t used, int64_t want, int64_t unit = 4, std::vector<Transfer> transfers = {}) {
  ClaimRequest r;
  r.done = done;
  r.used = used;
  r.want = want;
  r.unit = unit;
  r.transfers = std::move(transfers);
  return r;
}

// Issue 29: with two peers each admitting against the other's count of 25 ms ago, a step of 32
// averaged 36-52 samples. Grants are atomic: whoever asks, however often, the claims of a step
// never pass its target.
TEST(StepBookClaims, GrantsNeverPassTheTarget) {
  PeerTable t = table_with({"a", "b", "c"});
  StepBook book;
  int64_t used[3] = {0, 0, 0};
  int64_t granted[3] = {0, 0, 0};
  const char* names[3] = {"a", "b", "c"};
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3; ++i) {
      // Each asks for two more microbatches of 4 than it used; what it was granted it uses.
      ProgressView v = book.claim(0, 0, names[i], ask(0, used[i], used[i] + 8), 32, t, 1);
      granted[i] = v.granted;
      used[i] = v.granted;
      EXPECT_LE(v.samples_total, 32);
    }
  }
  EXPECT_EQ(granted[0] + granted[1] + granted[2], 32);
  ProgressView v = book.claim(0, 0, "a", ask(0, used[0], used[0] + 4), 32, t, 1);
  EXPECT_EQ(v.granted, used[0]);
  EXPECT_EQ(v.samples_total, 32);
  EXPECT_TRUE(v.target_reached);
  EXPECT_EQ(v.readmitted, 0);
}

TEST(StepBookClaims, AGrantIsWholeUnitsOrTheStepIsAsFullAsItGets) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  ProgressView v = book.claim(0, 0, "a", ask(0, 0, 8), 10, t, 1);
  EXPECT_EQ(v.granted, 8);
  EXPECT_FALSE(v.target_reached);
  // 2 left, b waits with a microbatch of 4: admitting it would pass the target.
  v = book.claim(0, 0, "b", ask(0, 0, 4), 10, t, 1);
  EXPECT_EQ(v.granted, 0);
  EXPECT_EQ(v.samples_total, 8);
  EXPECT_TRUE(v.target_reached);
}

TEST(StepBookClaims, AReleasedClaimReopensTheStep) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  EXPECT_TRUE(book.claim(0, 0, "a", ask(0, 8, 16), 16, t, 1).target_reached);
  // a's second forward expired in its queue: it asks for no more than it used.
  ProgressView v = book.claim(0, 0, "a", ask(4, 8, 8), 16, t, 1.1);
  EXPECT_EQ(v.granted, 8);
  EXPECT_FALSE(v.target_reached);
  v = book.claim(0, 0, "b", ask(0, 0, 8), 16, t, 1.2);
  EXPECT_EQ(v.granted, 8);
  EXPECT_TRUE(v.target_reached);
  // A claim is never below what the peer used: a used count is a fact.
  EXPECT_EQ(book.claim(0, 0, "b", ask(0, 12, 0), 16, t, 1.3).granted, 12);
  EXPECT_EQ(book.claims(0, 0), 20);
  EXPECT_EQ(book.claims(0, 1), 0);
}

TEST(StepBookClaims, NothingIsGrantedWhileGrantsAreWithheld) {
  PeerTable t = table_with({"a"});
  StepBook book;
  // A registry restarted a moment ago: peers re-tell what they used, nobody gets more yet.
  ProgressView v = book.claim(0, 5, "a", ask(4, 12, 20), 32, t, 1, /*grants=*/false);
  EXPECT_EQ(v.granted, 12);
  EXPECT_EQ(v.samples_total, 12);
  EXPECT_EQ(book.claim(0, 5, "a", ask(4, 12, 20), 32, t, 2).granted, 20);
}

// A killed peer's owed work comes back as retries on the live peers, each naming it: its claim
// moves to them, full step or not, so the stage admits each microbatch once in the step.
TEST(StepBookClaims, AGonePeersOwedWorkMovesToThePeersThatRetryIt) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.claim(0, 3, "a", ask(8, 16, 16), 32, t, 1);  // 8 done, 8 owed
  EXPECT_TRUE(book.claim(0, 3, "b", ask(0, 16, 16), 32, t, 1).target_reached);
  EXPECT_EQ(book.abandon(0, "a", 2), 8);  // its done samples are lost
  EXPECT_EQ(book.claims(0, 3), 32);
  // b is asked to recompute two microbatches a held.
  ProgressView v = book.claim(0, 3, "b", ask(0, 16, 24, 4, {{"a", 4}, {"a", 4}}), 32, t, 2.1);
  EXPECT_EQ(v.granted, 24);
  EXPECT_EQ(v.samples_total, 32);
  EXPECT_EQ(v.readmitted, 0);
  // A third retry naming a (it had done that one before it died): nothing of a's claim is left
  // to move, and the step is full: it waits for the next step, where it takes a fresh claim.
  v = book.claim(0, 3, "b", ask(0, 24, 28, 4, {{"a", 4}}), 32, t, 2.2);
  EXPECT_EQ(v.granted, 24);
  book.claim(0, 4, "b", ask(0, 0, 0), 32, t, 3);
  v = book.claim(0, 4, "b", ask(0, 0, 4, 4, {{"a", 4}}), 32, t, 3);
  EXPECT_EQ(v.granted, 4);
  EXPECT_EQ(v.readmitted, 0);  // a never reported in step 4: nothing of it was gone there
}

// A worker restarted under the same id (or a frozen one come back) reports afresh: what the
// gone process held stays in the step, and its retries still take that claim over.
TEST(StepBookClaims, APeerBackUnderItsIdLeavesWhatItsGoneProcessHeld) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.claim(0, 0, "a", ask(8, 16, 16), 32, t, 1);  // 8 done, 8 owed
  book.claim(0, 0, "b", ask(0, 16, 16), 32, t, 1);
  EXPECT_EQ(book.abandon(0, "a", 2), 8);
  ProgressView v = book.claim(0, 0, "a", ask(0, 0, 0), 32, t, 3);  // the new process, state downloaded
  EXPECT_EQ(v.samples_total, 32);
  EXPECT_TRUE(v.target_reached);
  v = book.claim(0, 0, "a", ask(0, 0, 4, 4, {{"a", 4}}), 32, t, 3.1);  // a retry of the old one's work
  EXPECT_EQ(v.granted, 0);  // from itself: nothing moves
  v = book.claim(0, 0, "b", ask(0, 16, 24, 4, {{"a", 4}, {"a", 4}}), 32, t, 3.2);
  EXPECT_EQ(v.granted, 24);
  EXPECT_EQ(v.samples_total, 32);
  book.join(0, 0, 0, member("b", 24), 10, 3.3);
  EXPECT_TRUE(book.group(0, 0, 0, t, 3.3).awaiting.empty());
}

TEST(StepBookClaims, ARetryOfWorkAGonePeerHadDoneTakesAFreshClaimCounted) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.claim(0, 0, "a", ask(8, 8, 8), 32, t, 1);  // all done
  book.claim(0, 0, "b", ask(0, 8, 8), 32, t, 1);
  EXPECT_EQ(book.abandon(0, "a", 2), 8);
  // It died between its backward and the reply: the trainer retries that microbatch on b.
  ProgressView v = book.claim(0, 0, "b", ask(0, 8, 12, 4, {{"a", 4}}), 32, t, 2.1);
  EXPECT_EQ(v.granted, 12);
  EXPECT_EQ(v.readmitted, 4);
  EXPECT_EQ(v.samples_total, 20);
}

TEST(StepBookClaims, TransfersComeOnlyFromPeersThatAreGone) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  book.claim(0, 0, "a", ask(0, 8, 8), 16, t, 1);
  book.claim(0, 0, "b", ask(0, 8, 8), 16, t, 1);
  // a lives (its activations expired: a recompute on b): nothing moves, and the step is full.
  EXPECT_EQ(book.claim(0, 0, "b", ask(0, 8, 12, 4, {{"a", 4}}), 16, t, 2).granted, 8);
  // a released what it dropped: the space is free for anyone.
  book.claim(0, 0, "a", ask(0, 4, 4), 16, t, 2.1);
  ProgressView v = book.claim(0, 0, "b", ask(0, 8, 12, 4, {{"a", 4}}), 16, t, 2.2);
  EXPECT_EQ(v.granted, 12);
  EXPECT_EQ(v.readmitted, 0);
  // An expired record is as good as gone.
  t.upsert(worker("b", 0), 5);
  v = book.claim(0, 0, "b", ask(0, 12, 16, 4, {{"a", 4}}), 16, t, 11);
  EXPECT_EQ(v.granted, 16);
  EXPECT_EQ(book.claims(0, 0), 16);
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
  g = book.group(0, 0, 0, t, 2.3);
  EXPECT_TRUE(g.awaiting.empty());
  EXPECT_EQ(g.state, GroupView::Ready);
  // Retries that never come (the trainer gave the microbatch up) hold the step kRetrySeconds.
  book.claim(0, 1, "a", ask(12, 12, 12), 32, t, 3);
  book.claim(0, 1, "b", ask(12, 20, 20), 32, t, 3);
  book.abandon(0, "b", 4);
  t.remove("b");
  book.join(0, 1, 0, member("a", 12), 10, 4);
  EXPECT_EQ(book.group(0, 1, 0, t, 4 + StepBook::kRetrySeconds - 0.1).state, GroupView::Gathering);
  EXPECT_EQ(book.group(0, 1, 0, t, 4 + StepBook::kRetrySeconds).state, GroupView::Ready);
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
