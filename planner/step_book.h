// StepBook: per-stage training progress and averaging-group matchmaking. Pure: no I/O, no
// threads (the caller serializes access), the clock is passed in as `now` seconds.
//
// Claims: exact admission. A step of a stage averages exactly `target` samples (the global batch),
// however many peers serve the stage. Each peer admits work (a forward, a recompute) only under
// its claim: a share of the step's target that the book granted it. A grant is atomic: the book
// grants n more only while the claims of the step, every peer's (a gone peer's included), stay
// within the target. Peers learning each other's counts every 25 ms admitted 36-52 samples per
// step of 32 with two peers (issue 29): their step counters drifted apart. With every peer's
// report a peer tells its running counts for the step: `done` (in its gradient), `used` (admitted
// under its claim: done + owed, hand-ins included) and `want` (the claim it asks for: used + the
// work waiting in its queue; less than its claim releases the rest). `used` is a fact: a claim
// never drops below it, even past the target (a hand-in, a registry restarted and re-told).
// The step is full once the claims reach the target (or the free space is smaller than the work
// that waits for it: `capped`); its peers stop asking, finish what they admitted and average.
// A claim released (a forward that expired in the queue, activations whose backward never came)
// makes the step not full again, and the work a peer admits next fills it.
//
// Gone peers (killed, expired: abandon) keep their claims: the samples they had done are lost
// (counted by the caller), and those they still owed come back as retries. A retry names the
// peer that held its work (`transfers`); the book moves that much of the gone peer's claim to
// the peer that retries, full step or not. So the stage admits each microbatch once per step,
// as the other stages do, and no stage's step counter runs ahead of another's. A retry whose
// gone peer has nothing left to move takes a fresh claim: counted (`readmitted`).
//
// Matchmaking. Peers that want to average gradients for (stage, step) join the group of an
// `attempt` (a retry after a failed all-reduce uses attempt + 1, a fresh group). A group gathers
// until the step is full, no gone peer's work is awaited and every live worker of the stage has
// joined, except a draining one (state "draining": it is leaving) that holds no claim of the
// step, and no joined peer holds a claim it has not admitted work under (a retry's transfer granted
// after it joined: it leaves to admit that work); or until `gather_seconds` have passed since its first join, counted only while the step
// is full and nothing is awaited (work a peer gives back restarts it, even when the same report
// takes the claim again for work already waiting). A step that is not full never closes: no stage steps on fewer
// samples than its global batch, and a stage with no live peer to fill it steps not at all. A
// gone peer's owed work is awaited for kRetrySeconds (at most half the gather window) after it
// went: its retries reach live peers, which leave the group (the view says whom it `awaits`),
// admit them and join again. A draining peer that holds samples of the step is waited for: it
// joins on its way out, so its gradient is averaged rather than handed to a peer that may
// already be averaging without it. When the group is complete, observed by group(), it turns
// Ready and its members (joined peers still live, sorted by peer_id) are frozen. A join after
// that is Closed.
//
// Restarts. A registry that restarts loses every group. Peers that saw their group Ready go on
// with it (a push to the leader, or the leader's gather) and re-tell it (restore) while they
// average; peers that had not yet seen it join again and are given that group.
//
// Garbage collection. Per stage the book keeps the newest step it has seen and the 4 before it.
// A step older than that is finished as far as the book is concerned: progress reports say
// target_reached (and grant nothing), joins are Closed, group() says Unknown.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/peer_table.h"

namespace swarm::planner {

struct ProgressView {
  int64_t step = 0;
  int64_t samples_total = 0;  // the step's claims, every peer's (see Claims above)
  int64_t target = 0;
  bool target_reached = false;  // full: no claim left to grant (not a latch: a release reopens it)
  int64_t granted = 0;          // the reporting peer's claim afterwards
  int64_t readmitted = 0;       // of it, fresh samples granted to retries of a gone peer's work
};

// A retry of work that `from` held when it went: move `samples` of its claim.
struct Transfer {
  std::string from;
  int64_t samples = 0;
};

// A peer's report of its running counts for a step, and what it asks for (see Claims above).
struct ClaimRequest {
  int64_t done = 0;   // samples in its gradient (>= 0)
  int64_t used = -1;  // admitted under its claim, >= done (-1: done)
  int64_t want = -1;  // the claim it asks for (-1: used: asks nothing, releases the rest)
  int64_t unit = 0;   // the samples of the first admission waiting for a claim (0: none)
  std::vector<Transfer> transfers;
};

struct Member {
  std::string peer_id;
  std::string host;
  int port = 0;
  int64_t samples = 0;
};

enum class JoinResult { Joined, Closed };

struct GroupView {
  enum State { Gathering, Ready, Unknown };
  State state = Unknown;
  std::vector<Member> members;  // sorted by peer_id; frozen once Ready
  std::string leader;           // members[0].peer_id, "" when there are no members
  // While gathering: whether the step is full (a member seeing false goes back to admitting
  // work), and the gone peers whose owed work is awaited (a member holding a retry of theirs
  // goes back to admit it).
  bool step_full = true;
  std::vector<std::string> awaiting;
  // Set by the one call that froze the group (Ready): samples gone peers owed the step whose
  // retries did not come before it closed (their claims were not taken over, or were taken over
  // by a live peer that had not admitted the retry when the window passed). The step averages
  // that much less; the retries land in a later step. The registry counts them once
  // ("samples_unretried"). Not on the wire.
  int64_t unretried = 0;
};

const char* to_string(GroupView::State s);  // "gathering" | "ready" | "unknown"

class StepBook {
 public:
  // Steps kept per stage: the newest and the (kStepsKept - 1) before it.
  static constexpr int64_t kStepsKept = 5;
  // How long a group waits for the retries of a gone peer's owed work (capped at half its
  // gather window): a trainer retries at once when a peer's connection fails, or once its lane
  // is back from another stage.
  static constexpr double kRetrySeconds = 2.0;

  // Records `peer`'s running counts for (stage, step) (latest value wins) and grants what it
  // asks for as far as the step's `target` (the latest reported) allows; transfers from peers
  // gone or not live in `peers` first. `grants` false (a registry restarted, not yet re-told by
  // every peer): the counts are recorded, nothing is granted. Returns the step's claims.
  ProgressView claim(int stage, int64_t step, const std::string& peer, const ClaimRequest& request,
                     int64_t target, const PeerTable& peers, double now, bool grants = true);

  // The same without a request: `samples` done, `admitted` used (-1 = samples); the claim
  // becomes what it used.
  ProgressView report_progress(int stage, int64_t step, const std::string& peer, int64_t samples,
                               int64_t target, const PeerTable& peers, double now,
                               int64_t admitted = -1);

  // Adds `m` to the group (stage, step, attempt), creating it (and fixing its gather window to
  // `gather_seconds` from `now`) if this is the first join. Closed if the group is Ready, its
  // gather window has passed, or the step is garbage. Joining again while gathering updates the
  // member; a peer that is already a member of a Ready group gets Joined (retries are safe).
  JoinResult join(int stage, int64_t step, int attempt, const Member& m, double gather_seconds,
                  double now);

  // The group's view; turns a gathering group Ready when its time has come (see above). With
  // `membership_known` false (`peers` may still lack live workers: a registry restarted mid-run
  // before every peer re-announced) only the gather window closes a group.
  GroupView group(int stage, int64_t step, int attempt, const PeerTable& peers, double now,
                  bool membership_known = true);

  // A member of a group that turned Ready re-tells its frozen `members` (a registry restarted
  // since then has lost it). A group this book does not hold, or holds gathering, becomes Ready
  // with exactly those members, so every peer still to ask gets the view the others act on; one
  // already Ready is kept. Returns the group's view afterwards (Unknown for a garbage step, or
  // when `members` is empty).
  GroupView restore(int stage, int64_t step, int attempt, const std::vector<Member>& members,
                    double now);

  // A peer is gone without settling its gradient (killed, or expired) at `now`: returns the
  // samples it reported done for the newest step of `stage` it reported in (and has not been
  // abandoned in), unless it is a member of that step's newest Ready group (then the step's
  // averaging already holds them). Its claim stays in the step (see Claims): what it owed
  // moves to the peers that retry it. 0 when it reported nothing (or nothing positive). The
  // caller counts the result as lost. A member that dies after its group froze but before
  // sending its gradient is counted by the group's leader, which averages without it.
  // `owed`, if given, is set to the samples of its claim it had not done (retries take them over).
  int64_t abandon(int stage, const std::string& peer, double now = 0, int64_t* owed = nullptr);

  // Introspection (tests, metrics, the registry's stats): steps currently held for a stage,
  // ascending, the newest step seen for it (-1 when none) and a step's claims (0 when unknown).
  std::vector<int64_t> steps(int stage) const;
  int64_t newest_step(int stage) const;
  int64_t claims(int stage, int64_t step) const;

 private:
  struct Group {
    bool ready = false;
    double opened_at = 0;
    double gather_seconds = 0;
    std::map<std::string, Member> joined;
    std::vector<Member> members;  // frozen when ready
  };
  // The key of what a gone peer held, once a peer reports again under its id ('#' is never in a
  // peer id).
  static inline const std::string kGoneSuffix = "#gone";
  // A peer's part of a step.
  struct Share {
    int64_t claim = 0;  // granted; never below used while the peer reports
    int64_t used = 0;   // admitted under the claim (done + owed, hand-ins included)
    int64_t done = 0;   // in its gradient
    bool gone = false;  // abandoned: claim - done is owed work its retries take over
    double gone_at = 0;
    int64_t held() const { return claim > used ? claim : used; }
  };
  struct Step {
    std::map<std::string, Share> shares;  // peer -> its part
    int64_t target = 0;
    bool capped = false;  // the free space is smaller than work that waits: as good as full
    double full_since = 0;  // when it last became full (or a peer gave back work it had admitted)
    std::map<int, Group> groups;  // attempt -> group
    int64_t total() const;        // every share's held(), saturated
    bool full() const { return capped || total() >= target; }
  };
  struct Stage {
    int64_t newest = -1;
    std::map<int64_t, Step> steps;
  };

  bool is_garbage(int stage, int64_t step) const;
  // The step's state, created if needed; collects steps that fall out of the window.
  Step& touch(int stage, int64_t step);
  Group* find_group(int stage, int64_t step, int attempt);
  // Moves what gone (or no longer live) peers named in `transfers` owe to `me`, up to `extra`;
  // returns how much moved, and in `uncovered` the retried samples nobody had left to move.
  int64_t take_transfers(Step& rd, Share& me, const std::string& peer, const std::vector<Transfer>& transfers,
                         int64_t extra, const PeerTable& peers, double now, int64_t& uncovered);
  // Gone peers of the step whose owed work is still awaited at `now` (window: see kRetrySeconds).
  static std::vector<std::string> awaited(const Step& rd, double window, double now);
  static double retry_window(const Group& g);
  // Whether the group's gather window has passed at `now` (see Matchmaking: it runs only while
  // the step is full and awaits nothing).
  static bool window_passed(const Group& g, const Step& rd, double now);
  // Whether every live worker the group must wait for has joined (group(); see Matchmaking).
  static bool everyone_joined(const Group& g, const Step& rd, int stage, const PeerTable& peers, double now);

  std::map<int, Stage> stages_;
};

}  // namespace swarm::planner
