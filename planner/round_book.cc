#include "planner/round_book.h"

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

bool RoundBook::is_garbage(int stage, int64_t round) const {
  auto it = stages_.find(stage);
  if (it == stages_.end() || it->second.newest < 0) return false;
  // newest >= 0 here, so newest - kRoundsKept cannot overflow.
  return round <= it->second.newest - kRoundsKept;
}

RoundBook::Round& RoundBook::touch(int stage, int64_t round) {
  Stage& st = stages_[stage];
  if (round > st.newest) {
    st.newest = round;
    while (!st.rounds.empty() && st.rounds.begin()->first <= st.newest - kRoundsKept) {
      st.rounds.erase(st.rounds.begin());
    }
  }
  return st.rounds[round];
}

RoundBook::Group* RoundBook::find_group(int stage, int64_t round, int attempt) {
  auto st = stages_.find(stage);
  if (st == stages_.end()) return nullptr;
  auto rd = st->second.rounds.find(round);
  if (rd == st->second.rounds.end()) return nullptr;
  auto gr = rd->second.groups.find(attempt);
  return gr == rd->second.groups.end() ? nullptr : &gr->second;
}

ProgressView RoundBook::report_progress(int stage, int64_t round, const std::string& peer,
                                        int64_t samples, int64_t target, const PeerTable& peers,
                                        double now, int64_t admitted) {
  if (is_garbage(stage, round)) return ProgressView{round, 0, target, true};
  Round& rd = touch(stage, round);
  rd.samples[peer] = samples;
  rd.admitted[peer] = admitted > samples ? admitted : samples;
  rd.target = target;
  int64_t total = 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const auto& [id, n] : rd.admitted) {
    if (n <= 0 || !peers.is_live(id, now)) continue;
    total = (total > kMax - n) ? kMax : total + n;  // saturate instead of overflowing
  }
  if (total >= rd.target) rd.target_reached = true;
  return ProgressView{round, total, rd.target, rd.target_reached};
}

JoinResult RoundBook::join(int stage, int64_t round, int attempt, const Member& m,
                           double gather_seconds, double now) {
  if (is_garbage(stage, round)) return JoinResult::Closed;
  Round& rd = touch(stage, round);
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
  if (now >= g.opened_at + g.gather_seconds && !created) {
    // The window has passed: the group is ready in all but bookkeeping (the next group() call
    // freezes it). Peers that made it in time stay in.
    return g.joined.count(m.peer_id) ? JoinResult::Joined : JoinResult::Closed;
  }
  g.joined[m.peer_id] = m;
  return JoinResult::Joined;
}

GroupView RoundBook::group(int stage, int64_t round, int attempt, const PeerTable& peers,
                           double now, bool membership_known) {
  GroupView view;
  if (is_garbage(stage, round)) return view;
  Group* g = find_group(stage, round, attempt);
  if (g == nullptr) return view;

  if (!g->ready) {
    bool timed_out = now >= g->opened_at + g->gather_seconds;
    bool everyone_in = membership_known && !g->joined.empty();
    if (!timed_out && everyone_in) {
      const Round& rd = stages_[stage].rounds[round];
      for (const PeerRecord& w : peers.live(now, "worker", stage)) {
        // A draining peer with nothing admitted this round has nothing to give: it is not waited
        // for. One that holds samples of this round joins on its way out. A joining peer (a
        // newcomer or a peer re-syncing, downloading state from a peer of this group) holds no
        // gradient: waiting for it would hold the round (and the download queued behind it) until
        // the window closes. Its state reaches the registry with its next heartbeat, so one that
        // already reported samples of this round serves and is waited for. A failed peer never is.
        if (w.state == PeerState::Failed) continue;
        if (w.state == PeerState::Draining || w.state == PeerState::Joining) {
          auto a = rd.admitted.find(w.peer_id);
          if (a == rd.admitted.end() || a->second <= 0) continue;
        }
        if (!g->joined.count(w.peer_id)) {
          everyone_in = false;
          break;
        }
      }
    }
    // No joined peer live (a registry that has not heard them yet): nobody to average, not complete.
    bool anyone_live = false;
    for (const auto& [id, m] : g->joined) anyone_live = anyone_live || peers.is_live(id, now);
    everyone_in = everyone_in && anyone_live;
    if (timed_out || everyone_in) {
      g->ready = true;
      for (const auto& [id, m] : g->joined) {  // map order: sorted by peer_id
        if (peers.is_live(id, now)) g->members.push_back(m);
      }
      g->joined.clear();
    }
  }

  if (g->ready) {
    view.state = GroupView::Ready;
    view.members = g->members;
  } else {
    view.state = GroupView::Gathering;
    for (const auto& [id, m] : g->joined) view.members.push_back(m);
  }
  if (!view.members.empty()) view.leader = view.members.front().peer_id;
  return view;
}

int64_t RoundBook::abandon(int stage, const std::string& peer) {
  auto st = stages_.find(stage);
  if (st == stages_.end()) return 0;
  for (auto rd = st->second.rounds.rbegin(); rd != st->second.rounds.rend(); ++rd) {
    auto it = rd->second.samples.find(peer);
    if (it == rd->second.samples.end()) continue;
    const int64_t n = it->second > 0 ? it->second : 0;
    rd->second.samples.erase(it);
    rd->second.admitted.erase(peer);
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

std::vector<int64_t> RoundBook::rounds(int stage) const {
  std::vector<int64_t> out;
  auto it = stages_.find(stage);
  if (it == stages_.end()) return out;
  for (const auto& [r, rd] : it->second.rounds) out.push_back(r);
  return out;
}

int64_t RoundBook::newest_round(int stage) const {
  auto it = stages_.find(stage);
  return it == stages_.end() ? -1 : it->second.newest;
}

}  // namespace swarm::planner
