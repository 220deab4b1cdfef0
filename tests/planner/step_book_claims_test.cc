// StepBook claims (planner/step_book.h, Claims): exact admission, issue 29.
#include "planner/step_book.h"

#include <gtest/gtest.h>

#include "tests/planner/step_book_helpers.h"

namespace swarm::planner {
namespace {

using namespace book_testing;

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

// A gone peer's claim that moves to a peer already in the step's group (the retry of its work
// reached that peer after it joined) holds the group: closed then, the step would average the
// moved samples short. It completes once that peer has done the work and joined again.
// Step 3 of stage 0 (global batch 32): a did 8 of its 16 samples and is gone at t=2 owing 8; b
// did 16 and joined the step's group at t=1.
void a_gone_owing_8_after_b_joined(StepBook& book, PeerTable& t) {
  book.claim(0, 3, "a", ask(8, 16, 16), 32, t, 1);
  book.claim(0, 3, "b", ask(16, 16, 16), 32, t, 1);
  ASSERT_EQ(book.join(0, 3, 0, member("b", 16), 10, 1.0), JoinResult::Joined);
  book.abandon(0, "a", 2);
  t.remove("a");
}

TEST(StepBookClaims, AGroupWaitsForAMembersClaimGrantedAfterItJoined) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  a_gone_owing_8_after_b_joined(book, t);
  EXPECT_EQ(book.group(0, 3, 0, t, 2.05).state, GroupView::Gathering);  // a's retries are awaited
  // The retry's transfer moves a's owed 8 to b, which is still a member.
  ProgressView v = book.claim(0, 3, "b", ask(16, 16, 24, 8, {{"a", 8}}), 32, t, 2.1);
  EXPECT_EQ(v.granted, 24);
  GroupView g = book.group(0, 3, 0, t, 2.15);
  EXPECT_EQ(g.state, GroupView::Gathering);
  EXPECT_TRUE(g.awaiting.empty());
  // b admits and finishes the retry, then joins again with 24 samples: complete.
  book.claim(0, 3, "b", ask(24, 24, 24), 32, t, 2.3);
  ASSERT_EQ(book.join(0, 3, 0, member("b", 24), 10, 2.3), JoinResult::Joined);
  g = book.group(0, 3, 0, t, 2.35);
  EXPECT_EQ(g.state, GroupView::Ready);
  ASSERT_EQ(g.members.size(), 1u);
  EXPECT_EQ(g.members[0].samples, 24);
  EXPECT_EQ(g.unretried, 0);
}

// The same moved claim, but the retry's work never reaches the peer that took the claim over
// before the gather window passes: the group closes without it and says those samples were
// unretried (the step averages that much short; counted, not lost from the books).
TEST(StepBookClaims, AClaimTakenOverButNotAdmittedWhenTheWindowPassesIsUnretried) {
  PeerTable t = table_with({"a", "b"});
  StepBook book;
  a_gone_owing_8_after_b_joined(book, t);
  ProgressView v = book.claim(0, 3, "b", ask(16, 16, 24, 8, {{"a", 8}}), 32, t, 2.1);
  ASSERT_EQ(v.granted, 24);
  EXPECT_EQ(book.group(0, 3, 0, t, 2.15).state, GroupView::Gathering);
  // The window (gather 10 s, after a's retry wait) passes with b's 8 moved samples not admitted
  // (b's heartbeats keep it live).
  const double late = 2 + StepBook::kRetrySeconds + 10 + 0.1;
  t.upsert(worker("b", 0), late);
  GroupView g = book.group(0, 3, 0, t, late);
  ASSERT_EQ(g.state, GroupView::Ready);
  ASSERT_EQ(g.members.size(), 1u);
  EXPECT_EQ(g.members[0].samples, 16);
  EXPECT_EQ(g.unretried, 8);
  // Said once, by the call that froze the group.
  EXPECT_EQ(book.group(0, 3, 0, t, late + 0.5).unretried, 0);
}

}  // namespace
}  // namespace swarm::planner
