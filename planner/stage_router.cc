#include "planner/stage_router.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_set>

namespace swarm::planner {
namespace {

// A measurement below this many seconds per request is clock noise; it would make the peer's cost
// ~0 and let it take every pick.
constexpr double kMinRequestSeconds = 1e-6;

bool contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

StageRouter::StageRouter(RouterOptions options) : options_(options) {
  if (!(options_.ema_alpha > 0 && options_.ema_alpha <= 1)) {
    throw std::invalid_argument("StageRouter: ema_alpha must be in (0, 1]");
  }
  if (!(options_.backward_weight > 0)) {
    throw std::invalid_argument("StageRouter: backward_weight must be > 0");
  }
  if (!(options_.explore_peer_seconds >= 0) || !(options_.ban_seconds >= 0) ||
      !(options_.max_ban_seconds >= 0) || !(options_.inter_region_penalty_seconds >= 0) ||
      !std::isfinite(options_.inter_region_penalty_seconds)) {
    throw std::invalid_argument("StageRouter: explore/ban/penalty seconds must be finite and >= 0");
  }
}

void StageRouter::observe(double now) {
  if (now > latest_now_) latest_now_ = now;
}

StageRouter::Peer* StageRouter::find(const std::string& id) {
  for (auto& p : peers_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

double StageRouter::unmeasured_cost() const {
  std::vector<double> emas;
  emas.reserve(peers_.size());
  for (const auto& p : peers_) {
    if (p.measured) emas.push_back(p.ema);
  }
  if (emas.empty()) return 1.0;
  const size_t mid = emas.size() / 2;
  std::nth_element(emas.begin(), emas.begin() + mid, emas.end());
  const double upper = emas[mid];
  if (emas.size() % 2 == 1) return upper;
  const double lower = *std::max_element(emas.begin(), emas.begin() + mid);
  return (lower + upper) / 2;
}

bool crosses_regions(const std::string& a, const std::string& b) {
  return !a.empty() && !b.empty() && a != b;
}

bool may_start_routing(const std::vector<StageCoverage>& stages, bool home_grace_passed) {
  for (const StageCoverage& c : stages) {
    if (c.routable <= 0) return false;
    if (!home_grace_passed && c.home_routable <= 0 && c.home_joining > 0) return false;
  }
  return true;
}

bool StageRouter::is_remote(const std::string& region) const {
  return crosses_regions(options_.home_region, region);
}

void StageRouter::set_peers(const std::vector<std::string>& peer_ids, double now) {
  std::vector<PeerCandidate> peers;
  peers.reserve(peer_ids.size());
  for (const auto& id : peer_ids) peers.push_back({id, ""});
  set_candidates(peers, now);
}

void StageRouter::set_candidates(const std::vector<PeerCandidate>& candidates, double now) {
  std::vector<std::string> peer_ids;
  peer_ids.reserve(candidates.size());
  for (const auto& c : candidates) peer_ids.push_back(c.id);
  swarm::MutexLock lock(mu_);
  observe(now);

  // New peers start at the smallest virtual time among the peers that stay, so they are tried
  // promptly without jumping ahead of anyone by more than one pick.
  double start = system_vtime_;
  bool any_kept = false;
  for (const auto& p : peers_) {
    if (!contains(peer_ids, p.id)) continue;
    const double v = std::max(p.vtime, system_vtime_);
    start = any_kept ? std::min(start, v) : v;
    any_kept = true;
  }

  std::vector<Peer> next;
  next.reserve(peer_ids.size());
  std::unordered_set<std::string> seen;
  for (const auto& c : candidates) {
    const std::string& id = c.id;
    if (!seen.insert(id).second) continue;
    if (Peer* old = find(id)) {
      next.push_back(std::move(*old));
      next.back().region = c.region;
      next.back().remote = is_remote(c.region);
      continue;
    }
    Peer p;
    p.id = id;
    p.region = c.region;
    p.remote = is_remote(c.region);
    p.vtime = start;
    p.explore_at = now + options_.explore_peer_seconds;
    next.push_back(std::move(p));
  }
  peers_ = std::move(next);
}

std::optional<std::string> StageRouter::pick_peer(Op op, int64_t samples, double now,
                                                  const std::vector<std::string>& exclude) {
  swarm::MutexLock lock(mu_);
  observe(now);
  if (samples < 1) samples = 1;

  Peer* chosen = nullptr;
  double chosen_key = 0;
  Peer* explore = nullptr;    // unmeasured for too long: picked regardless of virtual time
  Peer* fallback = nullptr;   // every eligible peer is banned: the one whose ban ends first
  for (auto& p : peers_) {
    if (!exclude.empty() && contains(exclude, p.id)) continue;
    if (p.banned_until > now) {
      if (!fallback || p.banned_until < fallback->banned_until ||
          (p.banned_until == fallback->banned_until && p.vtime < fallback->vtime)) {
        fallback = &p;
      }
      continue;
    }
    // A peer that sat out (banned or excluded) must not come back with a burst of catch-up picks:
    // its virtual time is at least that of the latest pick.
    p.vtime = std::max(p.vtime, system_vtime_);
    if (!p.measured && p.explore_at <= now && (!explore || p.explore_at < explore->explore_at)) {
      explore = &p;
    }
    // A remote peer competes with its virtual time plus the penalty (see the header).
    const double key = p.vtime + (p.remote ? options_.inter_region_penalty_seconds : 0);
    if (!chosen || key < chosen_key || (key == chosen_key && p.picks < chosen->picks)) {
      chosen = &p;
      chosen_key = key;
    }
  }
  if (explore) {
    // Out of turn: the system virtual time stays where it is (explore's may be far ahead).
    chosen = explore;
    explore->explore_at = now + options_.explore_peer_seconds;
  } else if (chosen) {
    system_vtime_ = chosen->vtime;  // every eligible virtual time was raised to it: monotonic
  } else if (fallback) {
    chosen = fallback;
    chosen->vtime = std::max(chosen->vtime, system_vtime_);
  } else {
    return std::nullopt;
  }
  const double per_sample = chosen->measured ? chosen->ema : unmeasured_cost();
  const double weight = op == Op::Backward ? options_.backward_weight : 1.0;
  chosen->vtime += per_sample * static_cast<double>(samples) * weight;
  ++chosen->picks;
  return chosen->id;
}

void StageRouter::report_success(const std::string& peer, Op op, int64_t samples, double seconds,
                                 double now) {
  swarm::MutexLock lock(mu_);
  observe(now);
  Peer* p = find(peer);
  if (!p) return;
  p->consecutive_failures = 0;
  if (samples < 1 || !std::isfinite(seconds) || seconds < 0) return;
  const double weight = op == Op::Backward ? options_.backward_weight : 1.0;
  const double x =
      std::max(seconds, kMinRequestSeconds) / static_cast<double>(samples) / weight;
  if (!p->measured) {
    p->ema = x;
    p->measured = true;
  } else {
    p->ema = options_.ema_alpha * x + (1 - options_.ema_alpha) * p->ema;
  }
}

void StageRouter::report_failure(const std::string& peer, double now) {
  swarm::MutexLock lock(mu_);
  observe(now);
  Peer* p = find(peer);
  if (!p) return;
  ++p->failures;
  ++p->consecutive_failures;
  double ban = options_.ban_seconds;
  for (int i = 1; i < p->consecutive_failures && ban < options_.max_ban_seconds; ++i) ban *= 2;
  ban = std::min(ban, options_.max_ban_seconds);
  p->banned_until = std::max(p->banned_until, now + ban);
}

std::vector<PeerStats> StageRouter::stats() const {
  swarm::MutexLock lock(mu_);
  std::vector<PeerStats> out;
  out.reserve(peers_.size());
  for (const auto& p : peers_) {
    PeerStats s;
    s.peer_id = p.id;
    s.region = p.region;
    s.remote = p.remote;
    s.seconds_per_sample = p.measured ? p.ema : 0;
    s.picks = p.picks;
    s.failures = p.failures;
    s.banned = p.banned_until > latest_now_;
    s.banned_until = p.banned_until;
    out.push_back(std::move(s));
  }
  return out;
}

size_t StageRouter::size() const {
  swarm::MutexLock lock(mu_);
  return peers_.size();
}

}  // namespace swarm::planner
