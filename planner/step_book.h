// StepBook: per-stage training progress and averaging-group matchmaking. Pure: no I/O, no
// threads (the caller serializes access), the clock is passed in as `now` seconds.
//
// Progress. Every peer of a stage reports, for the stage's current step, its running count of
// samples done (backward finished: in its gradient) and of samples admitted (done + forwards it
// accepted whose backward is still to come). The registry sums the admitted counts of peers that
// are still live. Once the sum reaches the target the step's `target_reached` latches: everyone
// stops admitting, finishes what it admitted and averages, even if a peer dies afterwards and the
// sum drops. Counting admitted rather than done work keeps a step close to the target: peers
// that only saw each other's finished samples admitted up to ~20 % more than the global batch.
//
// Matchmaking. Peers that want to average gradients for (stage, step) join the group of an
// `attempt` (a retry after a failed all-reduce uses attempt + 1, a fresh group). A group gathers
// until every live worker of the stage has joined, except a draining one (state "draining": it is
// leaving) that reported no admitted sample for the step, or `gather_seconds` (fixed by its first
// join) have passed since its first join. A draining peer that holds samples of the step is waited
// for: it joins on its way out, so its gradient is averaged rather than handed to a peer that may
// already be averaging without it; at that moment, observed by group(), it turns Ready and its
// members (joined peers still live, sorted by peer_id) are frozen. A join after that is Closed.
//
// Restarts. A registry that restarts loses every group. Peers that saw their group Ready go on
// with it (a push to the leader, or the leader's gather) and re-tell it (restore) while they
// average; peers that had not yet seen it join again and are given that group.
//
// Garbage collection. Per stage the book keeps the newest step it has seen and the 4 before it.
// A step older than that is finished as far as the book is concerned: progress reports say
// target_reached, joins are Closed, group() says Unknown.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/peer_table.h"

namespace swarm::planner {

struct ProgressView {
  int64_t step = 0;
  int64_t samples_total = 0;  // admitted samples of the live peers (see Progress above)
  int64_t target = 0;
  bool target_reached = false;
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
};

const char* to_string(GroupView::State s);  // "gathering" | "ready" | "unknown"

class StepBook {
 public:
  // Steps kept per stage: the newest and the (kStepsKept - 1) before it.
  static constexpr int64_t kStepsKept = 5;

  // Records `samples` (done) and `admitted` (taken as max(admitted, samples); -1 = samples) as
  // `peer`'s running totals for (stage, step) (latest value wins) and returns the sum of the
  // admitted totals over peers live in `peers`, against `target` (the latest reported target).
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

  // A peer is gone without settling its gradient (killed, or expired): returns the samples it
  // reported for the newest step of `stage` it reported in, unless it is a member of that step's
  // newest Ready group (then the step's averaging already holds them), and forgets its report.
  // 0 when it reported nothing (or nothing positive). The caller counts the result as lost.
  // Limitation: a member that dies after its group froze but before sending its gradient is not
  // counted here (the group's leader retries without it).
  int64_t abandon(int stage, const std::string& peer);

  // Introspection (tests, metrics): steps currently held for a stage, ascending, and the newest
  // step seen for it (-1 when none).
  std::vector<int64_t> steps(int stage) const;
  int64_t newest_step(int stage) const;

 private:
  struct Group {
    bool ready = false;
    double opened_at = 0;
    double gather_seconds = 0;
    std::map<std::string, Member> joined;
    std::vector<Member> members;  // frozen when ready
  };
  struct Step {
    std::map<std::string, int64_t> samples;   // peer -> running total done
    std::map<std::string, int64_t> admitted;  // peer -> running total admitted (>= done)
    int64_t target = 0;
    bool target_reached = false;
    std::map<int, Group> groups;  // attempt -> group
  };
  struct Stage {
    int64_t newest = -1;
    std::map<int64_t, Step> steps;
  };

  bool is_garbage(int stage, int64_t step) const;
  // The step's state, created if needed; collects steps that fall out of the window.
  Step& touch(int stage, int64_t step);
  Group* find_group(int stage, int64_t step, int attempt);

  std::map<int, Stage> stages_;
};

}  // namespace swarm::planner
