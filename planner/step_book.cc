#include "planner/step_book.h"

#include <algorithm>
#include <limits>

namespace swarm::planner {

const char* to_string(GroupView::State s) {
  switch (s) {
    case GroupView::Gathering:
      return "gathering";
    case GroupView::Ready:
      return "ready";
    case GroupView::Unknown:
      break;
  }
  return "unknown";
}

bool StepBook::is_garbage(int stage, int64_t step) const {
  auto it = stages_.find(stage);
  if (it == stages_.end() || it->second.newest < 0) return false;
  // newest >= 0 here, so newest - kStepsKept cannot overflow.
  return step <= it->second.newest - kStepsKept;
}

StepBook::Step& StepBook::touch(int stage, int64_t step) {
  Stage& st = stages_[stage];
  if (step > st.newest) {
    st.newest = step;
    while (!st.steps.empty() && st.steps.begin()->first <= st.newest - kStepsKept) {
      st.steps.erase(st.steps.begin());
    }
  }
  return st.steps[step];
}

StepBook::Group* StepBook::find_group(int stage, int64_t step, int attempt) {
  auto st = stages_.find(stage);
  if (st == stages_.end()) return nullptr;
  auto rd = st->second.steps.find(step);
  if (rd == st->second.steps.end()) return nullptr;
  auto gr = rd->second.groups.find(attempt);
  return gr == rd->second.groups.end() ? nullptr : &gr->second;
}

int64_t StepBook::Step::total() const {
  int64_t total = 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const auto& [id, sh] : shares) {
    const int64_t n = sh.held();
    if (n > 0) total = (total > kMax - n) ? kMax : total + n;  // saturate instead of overflowing
  }
  return total;
}

int64_t StepBook::take_transfers(Step& rd, Share& me, const std::string& peer,
                                 const std::vector<Transfer>& transfers, int64_t extra,
                                 const PeerTable& peers, double now, int64_t& uncovered) {
  int64_t moved = 0;
  uncovered = 0;
  for (const Transfer& t : transfers) {
    if (t.samples <= 0 || t.from == peer) continue;
    // Only a peer that is gone hands over its claim: a live one still serves what it holds (or
    // released what it dropped, which any peer may claim). One that came back under its id left
    // what it held as gone under another key.
    auto it = rd.shares.find(t.from + kGoneSuffix);
    if (it == rd.shares.end() || it->second.held() <= it->second.done) it = rd.shares.find(t.from);
    const bool gone = it != rd.shares.end() && (it->second.gone || !peers.is_live(t.from, now));
    if (!gone) continue;
    Share& from = it->second;
    from.claim = from.held();
    const int64_t owed = from.claim - (from.done > 0 ? from.done : 0);
    const int64_t n = std::min({t.samples, std::max<int64_t>(0, owed), extra - moved});
    from.claim -= n;
    if (from.used > from.claim) from.used = from.claim;
    moved += n;
    uncovered += t.samples - n;  // nothing left of its claim: this retry needs a fresh one
  }
  me.claim += moved;
  return moved;
}

ProgressView StepBook::claim(int stage, int64_t step, const std::string& peer, const ClaimRequest& r,
                             int64_t target, const PeerTable& peers, double now, bool grants) {
  if (is_garbage(stage, step)) return ProgressView{step, 0, target, true, 0, 0};
  Step& rd = touch(stage, step);
  const bool was_full = !rd.shares.empty() && rd.full();
  rd.target = target;
  Share& me = rd.shares[peer];
  if (me.gone) {
    // It reports again: a frozen peer come back, or a new process under the same id. What the
    // gone one held stays in the step under another key (its done samples were counted lost, its
    // owed work is retried), and this report starts a share of its own.
    Share& was = rd.shares[peer + kGoneSuffix];
    was.claim = was.held() + me.held();
    was.done = std::max<int64_t>(0, was.done) + std::max<int64_t>(0, me.done);
    was.used = 0;
    was.gone = true;
    was.gone_at = std::max(was.gone_at, me.gone_at);
    me = Share{};
  }
  const int64_t used_before = me.used;
  me.done = r.done;
  me.used = std::max(r.used, r.done);
  // Work this peer admitted and gave back (activations whose backward did not come, dropped): the
  // step was not full from then until its claim was taken again, even when this same report takes
  // it (the work that refills it was already waiting). Its gather window starts again, as for any
  // refill: a peer holding the rest of the step must not be averaged without because the step looked
  // full throughout (FaultMatrix.ATrainerKilledMidRunIsReplacedAndTheRunFinishes).
  const bool released = me.used < used_before;
  const int64_t want = r.want < 0 ? me.used : std::max(r.want, me.used);
  me.claim = std::max(me.used, std::min(me.claim, want));  // a smaller want releases the rest
  int64_t readmitted = 0;
  if (grants && want > me.claim) {
    int64_t uncovered = 0;
    take_transfers(rd, me, peer, r.transfers, want - me.claim, peers, now, uncovered);
    const int64_t free = target - rd.total();
    int64_t g = std::min(want - me.claim, std::max<int64_t>(0, free));
    if (want > me.claim && g < r.unit) {
      // Less room than the work that waits: admitting it would pass the target, waiting for room
      // would wait for good. The step is as full as it gets.
      if (free > 0) rd.capped = true;
      g = 0;
    }
    me.claim += g;
    readmitted = std::min(g, uncovered);
  }
  const bool full = rd.full();
  if (full && (!was_full || released)) rd.full_since = now;  // the gather window of its groups starts again
  return ProgressView{step, rd.total(), rd.target, full, me.claim, readmitted};
}

ProgressView StepBook::report_progress(int stage, int64_t step, const std::string& peer, int64_t samples,
                                       int64_t target, const PeerTable& peers, double now, int64_t admitted) {
  ClaimRequest r;
  r.done = samples;
  r.used = admitted;
  return claim(stage, step, peer, r, target, peers, now);
}

JoinResult StepBook::join(int stage, int64_t step, int attempt, const Member& m,
                          double gather_seconds, double now) {
  if (is_garbage(stage, step)) return JoinResult::Closed;
  Step& rd = touch(stage, step);
  auto [it, created] = rd.groups.try_emplace(attempt);
  Group& g = it->second;
  if (created) {
    g.opened_at = now;
    g.gather_seconds = gather_seconds;
  }
  if (g.ready) {
    for (const Member& x : g.members) {
      if (x.peer_id == m.peer_id) return JoinResult::Joined;
    }
    return JoinResult::Closed;
  }
  if (!created && window_passed(g, rd, now)) {
    // The window has passed: the group is ready in all but bookkeeping (the next group() call
    // freezes it). Peers that made it in time stay in.
    return g.joined.count(m.peer_id) ? JoinResult::Joined : JoinResult::Closed;
  }
  g.joined[m.peer_id] = m;
  return JoinResult::Joined;
}

std::vector<std::string> StepBook::awaited(const Step& rd, double window, double now) {
  std::vector<std::string> out;
  for (const auto& [id, sh] : rd.shares)
    if (sh.gone && sh.held() > (sh.done > 0 ? sh.done : 0) && now < sh.gone_at + window)
      out.push_back(id.size() > kGoneSuffix.size() && id.compare(id.size() - kGoneSuffix.size(), kGoneSuffix.size(),
                                                                 kGoneSuffix) == 0
                        ? id.substr(0, id.size() - kGoneSuffix.size())
                        : id);
  return out;
}

bool StepBook::everyone_joined(const Group& g, const Step& rd, int stage, const PeerTable& peers, double now) {
  if (g.joined.empty()) return false;
  for (const PeerRecord& w : peers.live(now, "worker", stage)) {
    // A draining peer with no claim this step has nothing to give: it is not waited for. One
    // that holds samples of this step joins on its way out. A joining peer (a newcomer or a peer
    // re-syncing, downloading state from a peer of this group) holds no gradient: waiting for it
    // would hold the step (and the download queued behind it) until the window closes. Its state
    // reaches the registry with its next heartbeat, so one that already claimed samples of this
    // step serves and is waited for. A failed peer never is.
    if (w.state == PeerState::Failed) continue;
    if (w.state == PeerState::Draining || w.state == PeerState::Joining) {
      auto a = rd.shares.find(w.peer_id);
      if (a == rd.shares.end() || a->second.held() <= 0) continue;
    }
    if (!g.joined.count(w.peer_id)) return false;
  }
  // A member granted a claim it has not yet admitted work under (a gone peer's claim moved to it
  // with a retry, after it joined) owes the step that work: it goes back to admit it (its view of
  // its own claim says so) and joins again. Closed now, the step would average that much short.
  for (const auto& [id, m] : g.joined) {
    auto a = rd.shares.find(id);
    if (a != rd.shares.end() && !a->second.gone && a->second.claim > a->second.used) return false;
  }
  // No joined peer live (a registry that has not heard them yet): nobody to average, not complete.
  for (const auto& [id, m] : g.joined)
    if (peers.is_live(id, now)) return true;
  return false;
}

double StepBook::retry_window(const Group& g) { return std::min(kRetrySeconds, g.gather_seconds / 2); }

bool StepBook::window_passed(const Group& g, const Step& rd, double now) {
  // The window runs only while the group could close: from its first join, the moment the step
  // last became full and the end of every gone peer's retry wait, whichever came last. A step
  // that is not full holds nobody back yet: its peers went back to admitting work.
  if (!rd.full()) return false;
  double opens = std::max(g.opened_at, rd.full_since);
  for (const auto& [id, sh] : rd.shares)
    if (sh.gone) opens = std::max(opens, sh.gone_at + retry_window(g));
  return now >= opens + g.gather_seconds;
}

GroupView StepBook::group(int stage, int64_t step, int attempt, const PeerTable& peers,
                          double now, bool membership_known) {
  GroupView view;
  if (is_garbage(stage, step)) return view;
  Group* g = find_group(stage, step, attempt);
  if (g == nullptr) return view;
  const Step& rd = stages_[stage].steps[step];

  if (!g->ready) {
    view.step_full = rd.full();
    view.awaiting = awaited(rd, retry_window(*g), now);
    const bool timed_out = window_passed(*g, rd, now);
    const bool complete = view.step_full && view.awaiting.empty() && membership_known &&
                          everyone_joined(*g, rd, stage, peers, now);
    if (timed_out || complete) {
      g->ready = true;
      // Owed work that did not come: a gone peer's claim nobody took over, and (a group whose
      // window passed) a live peer's claim taken over with a retry it had not admitted yet.
      for (const auto& [id, sh] : rd.shares)
        view.unretried += sh.gone ? std::max<int64_t>(0, sh.held() - std::max<int64_t>(0, sh.done))
                                  : std::max<int64_t>(0, sh.claim - sh.used);
      for (const auto& [id, m] : g->joined) {  // map order: sorted by peer_id
        if (peers.is_live(id, now)) g->members.push_back(m);
      }
      g->joined.clear();
    }
  }

  if (g->ready) {
    view.state = GroupView::Ready;
    view.members = g->members;
    view.step_full = true;
    view.awaiting.clear();
  } else {
    view.state = GroupView::Gathering;
    for (const auto& [id, m] : g->joined) view.members.push_back(m);
  }
  if (!view.members.empty()) view.leader = view.members.front().peer_id;
  return view;
}

GroupView StepBook::restore(int stage, int64_t step, int attempt, const std::vector<Member>& members,
                            double now) {
  GroupView view;
  if (is_garbage(stage, step) || members.empty()) return view;
  Step& rd = touch(stage, step);
  auto [it, created] = rd.groups.try_emplace(attempt);
  Group& g = it->second;
  if (created) {
    g.opened_at = now;
  }
  if (!g.ready) {
    std::map<std::string, Member> sorted;
    for (const Member& m : members) sorted[m.peer_id] = m;
    g.ready = true;
    g.members.clear();
    for (const auto& [id, m] : sorted) g.members.push_back(m);
    g.joined.clear();
  }
  view.state = GroupView::Ready;
  view.members = g.members;
  if (!view.members.empty()) view.leader = view.members.front().peer_id;
  return view;
}

int64_t StepBook::abandon(int stage, const std::string& peer, double now, int64_t* owed) {
  if (owed) *owed = 0;
  auto st = stages_.find(stage);
  if (st == stages_.end()) return 0;
  for (auto rd = st->second.steps.rbegin(); rd != st->second.steps.rend(); ++rd) {
    auto it = rd->second.shares.find(peer);
    if (it == rd->second.shares.end() || it->second.gone) continue;
    Share& sh = it->second;
    // Its claim stays: what it had done is lost (the caller counts it), what it owed is retried
    // by trainers on live peers, which take the claim over (take_transfers).
    sh.gone = true;
    sh.gone_at = now;
    sh.claim = sh.held();
    const int64_t n = sh.done > 0 ? sh.done : 0;
    if (owed) *owed = sh.claim - n;
    const Group* newest_ready = nullptr;  // attempts ascend in the map: the last Ready one wins
    for (const auto& [attempt, g] : rd->second.groups) {
      if (g.ready) newest_ready = &g;
    }
    if (newest_ready != nullptr) {
      for (const Member& m : newest_ready->members) {
        if (m.peer_id == peer) return 0;
      }
    }
    return n;
  }
  return 0;
}

std::vector<int64_t> StepBook::steps(int stage) const {
  std::vector<int64_t> out;
  auto it = stages_.find(stage);
  if (it == stages_.end()) return out;
  for (const auto& [r, rd] : it->second.steps) out.push_back(r);
  return out;
}

int64_t StepBook::claims(int stage, int64_t step) const {
  auto st = stages_.find(stage);
  if (st == stages_.end()) return 0;
  auto rd = st->second.steps.find(step);
  return rd == st->second.steps.end() ? 0 : rd->second.total();
}

int64_t StepBook::newest_step(int stage) const {
  auto it = stages_.find(stage);
  return it == stages_.end() ? -1 : it->second.newest;
}

}  // namespace swarm::planner
