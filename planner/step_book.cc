#include "planner/step_book.h"

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

ProgressView StepBook::report_progress(int stage, int64_t step, const std::string& peer,
                                       int64_t samples, int64_t target, const PeerTable& peers,
                                       double now, int64_t admitted) {
  if (is_garbage(stage, step)) return ProgressView{step, 0, target, true};
  Step& rd = touch(stage, step);
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
  return ProgressView{step, total, rd.target, rd.target_reached};
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
  if (now >= g.opened_at + g.gather_seconds && !created) {
    // The window has passed: the group is ready in all but bookkeeping (the next group() call
    // freezes it). Peers that made it in time stay in.
    return g.joined.count(m.peer_id) ? JoinResult::Joined : JoinResult::Closed;
  }
  g.joined[m.peer_id] = m;
  return JoinResult::Joined;
}

GroupView StepBook::group(int stage, int64_t step, int attempt, const PeerTable& peers,
                          double now, bool membership_known) {
  GroupView view;
  if (is_garbage(stage, step)) return view;
  Group* g = find_group(stage, step, attempt);
  if (g == nullptr) return view;

  if (!g->ready) {
    bool timed_out = now >= g->opened_at + g->gather_seconds;
    bool everyone_in = membership_known && !g->joined.empty();
    if (!timed_out && everyone_in) {
      const Step& rd = stages_[stage].steps[step];
      for (const PeerRecord& w : peers.live(now, "worker", stage)) {
        // A draining peer with nothing admitted this step has nothing to give: it is not waited
        // for. One that holds samples of this step joins on its way out. A joining peer (a
        // newcomer or a peer re-syncing, downloading state from a peer of this group) holds no
        // gradient: waiting for it would hold the step (and the download queued behind it) until
        // the window closes. Its state reaches the registry with its next heartbeat, so one that
        // already reported samples of this step serves and is waited for. A failed peer never is.
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

int64_t StepBook::abandon(int stage, const std::string& peer) {
  auto st = stages_.find(stage);
  if (st == stages_.end()) return 0;
  for (auto rd = st->second.steps.rbegin(); rd != st->second.steps.rend(); ++rd) {
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

std::vector<int64_t> StepBook::steps(int stage) const {
  std::vector<int64_t> out;
  auto it = stages_.find(stage);
  if (it == stages_.end()) return out;
  for (const auto& [r, rd] : it->second.steps) out.push_back(r);
  return out;
}

int64_t StepBook::newest_step(int stage) const {
  auto it = stages_.find(stage);
  return it == stages_.end() ? -1 : it->second.newest;
}

}  // namespace swarm::planner
