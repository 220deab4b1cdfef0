#include "planner/rebalance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <stdexcept>

namespace swarm::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kRelTol = 1e-9;  // values this close (relatively) tie

// -1, 0, +1 with a relative tolerance; infinities compare exactly.
int cmp(double a, double b) {
  if (a == b) return 0;
  if (std::isinf(a) || std::isinf(b)) return a < b ? -1 : 1;
  if (std::fabs(a - b) <= kRelTol * std::max(std::fabs(a), std::fabs(b))) return 0;
  return a < b ? -1 : 1;
}

bool known(double samples_per_second) {
  return std::isfinite(samples_per_second) && samples_per_second > 0;
}

double clean_queue(double q) { return std::isfinite(q) && q > 0 ? q : 0; }

double throughput_of(const PeerLoad& p, double fallback) {
  return known(p.samples_per_second) ? p.samples_per_second : fallback;
}

bool in_range(int stage, int num_stages) { return stage >= 0 && stage < num_stages; }

// Stable across platforms and runs (std::hash is not): FNV-1a over "a\0b", then the splitmix64
// finalizer so that ids differing only in their last characters spread over the whole range.
uint64_t pair_hash(const std::string& a, const std::string& b) {
  uint64_t h = 14695981039346656037ull;
  auto feed = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (char c : a) feed(static_cast<unsigned char>(c));
  feed(0);
  for (char c : b) feed(static_cast<unsigned char>(c));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

// Stable selection sort by `better`. Used instead of std::sort because a comparator with a
// tolerance is not a strict weak ordering; the inputs are tiny (stages, peers of one stage).
template <class T, class Better>
void order_by(std::vector<T>& v, Better better) {
  for (size_t i = 0; i < v.size(); ++i) {
    size_t best = i;
    for (size_t j = i + 1; j < v.size(); ++j) {
      if (better(v[j], v[best])) best = j;
    }
    std::rotate(v.begin() + i, v.begin() + best, v.begin() + best + 1);
  }
}

// Among stages of about the bottleneck's capacity: most loaded; ties -> lower throughput, fewer
// peers, lower index.
bool more_loaded_target(const StageLoad& a, const StageLoad& b) {
  if (int c = cmp(a.load, b.load)) return c > 0;
  if (int c = cmp(a.throughput, b.throughput)) return c < 0;
  if (a.peers != b.peers) return a.peers < b.peers;
  return a.stage < b.stage;
}

// Rebalancing source: least loaded; ties -> higher throughput, more peers, lower index.
bool less_loaded_source(const StageLoad& a, const StageLoad& b) {
  if (int c = cmp(a.load, b.load)) return c < 0;
  if (int c = cmp(a.throughput, b.throughput)) return c > 0;
  if (a.peers != b.peers) return a.peers > b.peers;
  return a.stage < b.stage;
}

// Relative cost per sample of `stage` (options.stage_costs; 1 when absent or not positive).
double stage_cost(const RebalanceOptions& o, int stage) {
  if (stage < 0 || static_cast<size_t>(stage) >= o.stage_costs.size()) return 1.0;
  const double c = o.stage_costs[static_cast<size_t>(stage)];
  return std::isfinite(c) && c > 0 ? c : 1.0;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A peer that Rebalancer::plan could move from a source stage to the target.
struct Candidate {
  const PeerLoad* peer;
  double speed;     // on its stage
  double arriving;  // its estimated speed on the target stage
  double load;
  double pair;  // min(source after, target after)
};

// The stages that may give a peer to the target (Rebalancer::plan): every other stage that keeps
// >= `keep` peers and >= 1 serving (non-joining) peer after losing one; least loaded first.
std::vector<StageLoad> source_stages(const std::vector<PeerLoad>& peers,
                                     const std::vector<StageLoad>& loads, int target_stage,
                                     int keep, int num_stages) {
  std::vector<int> serving(loads.size(), 0);  // non-joining peers per stage
  for (const auto& p : peers) {
    if (in_range(p.stage, num_stages) && !p.joining) serving[static_cast<size_t>(p.stage)] += 1;
  }
  std::vector<StageLoad> sources;
  for (const auto& l : loads) {
    if (l.stage == target_stage) continue;
    if (l.peers - 1 < keep || serving[static_cast<size_t>(l.stage)] < 2) continue;
    sources.push_back(l);
  }
  order_by(sources, less_loaded_source);
  return sources;
}

// The movable peers of `src` (not joining, not in cooldown at `now`, of `region` when it names
// one), least loaded first; ties -> the better min(source after, target after), then the lowest
// peer_id.
std::vector<Candidate> movable_peers(const std::vector<PeerLoad>& peers, const StageLoad& src,
                                     const StageLoad& target, double fallback,
                                     const Rebalancer& rebalancer, double now, const std::string& region) {
  // Stages differ in cost per sample (the last one also runs the LM head): a peer serves the
  // target at its speed times the ratio of the two stages' costs.
  const double scale = stage_cost(rebalancer.options(), src.stage) /
                       stage_cost(rebalancer.options(), target.stage);
  std::vector<Candidate> cands;
  for (const auto& p : peers) {
    if (p.stage != src.stage || p.joining || rebalancer.in_cooldown(p.peer_id, now)) continue;
    if (!region.empty() && p.region != region) continue;  // a region-less peer serves every region
    const double v = throughput_of(p, fallback);
    const double w = v * scale;
    cands.push_back({&p, v, w, clean_queue(p.queue_length) / v,
                     std::min(src.throughput - v, target.throughput + w)});
  }
  order_by(cands, [](const Candidate& a, const Candidate& b) {
    if (int c = cmp(a.load, b.load)) return c < 0;
    if (int c = cmp(a.pair, b.pair)) return c > 0;
    return a.peer->peer_id < b.peer->peer_id;
  });
  return cands;
}

// The move of `c` from `src` to `target`, with the global bottleneck before and after it
// (simulated on `loads`); no reason yet.
Move simulate_move(const std::vector<StageLoad>& loads, const StageLoad& src,
                   const StageLoad& target, const Candidate& c) {
  std::vector<StageLoad> after = loads;
  after[static_cast<size_t>(src.stage)].peers -= 1;
  after[static_cast<size_t>(src.stage)].throughput -= c.speed;
  after[static_cast<size_t>(target.stage)].peers += 1;
  after[static_cast<size_t>(target.stage)].throughput += c.arriving;
  Move m;
  m.peer_id = c.peer->peer_id;
  m.from_stage = src.stage;
  m.to_stage = target.stage;
  m.bottleneck_before = bottleneck_throughput(loads);
  m.bottleneck_after = bottleneck_throughput(after);
  return m;
}

// Move::reason for moving `c` from `src` to `target`.
std::string move_reason(const StageLoad& src, const StageLoad& target, const Candidate& c,
                        double min_gain) {
  const std::string who = "peer " + c.peer->peer_id + " (" + num(c.speed) +
                          " samples/s) from stage " + std::to_string(src.stage) + " (" +
                          num(src.throughput) + " -> " + num(src.throughput - c.speed) +
                          " samples/s)";
  if (target.peers == 0) {
    return "stage " + std::to_string(target.stage) +
           " has no peers and stops the pipeline; moving " + who;
  }
  return "stage " + std::to_string(target.stage) + " is the most loaded (load " +
         num(target.load) + ", " + num(target.throughput) + " samples/s); moving " + who +
         " raises the slower of the two stages from " + num(target.throughput) + " to " +
         num(c.pair) + " samples/s (it serves about " + num(c.arriving) + " samples/s there; +" +
         num(100 * (c.pair / target.throughput - 1)) + "%, min_gain " + num(100 * min_gain) + "%)";
}

}  // namespace

double unknown_throughput_estimate(const std::vector<PeerLoad>& peers) {
  std::vector<double> speeds;
  speeds.reserve(peers.size());
  for (const auto& p : peers) {
    if (known(p.samples_per_second)) speeds.push_back(p.samples_per_second);
  }
  if (speeds.empty()) return 1.0;
  std::sort(speeds.begin(), speeds.end());
  const size_t mid = speeds.size() / 2;
  return speeds.size() % 2 == 1 ? speeds[mid] : (speeds[mid - 1] + speeds[mid]) / 2;
}

std::vector<StageLoad> stage_loads(const std::vector<PeerLoad>& peers, int num_stages,
                                   const RebalanceOptions& /*options*/) {
  std::vector<StageLoad> loads(static_cast<size_t>(std::max(num_stages, 0)));
  for (size_t s = 0; s < loads.size(); ++s) loads[s].stage = static_cast<int>(s);
  const double fallback = unknown_throughput_estimate(peers);
  for (const auto& p : peers) {
    if (!in_range(p.stage, num_stages)) continue;
    StageLoad& l = loads[static_cast<size_t>(p.stage)];
    l.peers += 1;
    l.throughput += throughput_of(p, fallback);
    l.queue += clean_queue(p.queue_length);
  }
  for (auto& l : loads) l.load = l.peers == 0 ? kInf : l.queue / l.throughput;
  return loads;
}

double bottleneck_throughput(const std::vector<StageLoad>& loads) {
  if (loads.empty()) return 0;
  double b = kInf;
  for (const auto& l : loads) b = std::min(b, l.peers == 0 ? 0.0 : l.throughput);
  return b;
}

int most_loaded_stage(const std::vector<StageLoad>& loads, double band) {
  if (loads.empty()) return -1;
  // An empty stage stops the pipeline: it comes first (its load is infinite).
  double floor = kInf;
  for (const auto& l : loads) {
    if (l.peers == 0) return l.stage;  // several empty: the lowest index
    floor = std::min(floor, l.throughput);
  }
  const double ceiling = (1 + std::max(band, 0.0)) * floor;
  int best = -1;
  for (const auto& l : loads) {
    if (cmp(l.throughput, ceiling) > 0) continue;  // clearly faster than the bottleneck
    if (best < 0 || more_loaded_target(l, loads[static_cast<size_t>(best)])) best = l.stage;
  }
  return best;
}

int choose_stage_for_joiner(const std::vector<PeerLoad>& peers, int num_stages,
                            const RebalanceOptions& options, const std::string& region) {
  if (num_stages <= 0) return -1;
  const auto pool = region.empty() ? peers : region_pool(peers, region);
  return most_loaded_stage(stage_loads(pool, num_stages, options), options.min_gain);
}

std::vector<std::string> regions_of(const std::vector<PeerLoad>& peers) {
  std::set<std::string> names;
  for (const auto& p : peers)
    if (!p.region.empty()) names.insert(p.region);
  return {names.begin(), names.end()};
}

std::vector<PeerLoad> region_pool(const std::vector<PeerLoad>& peers, const std::string& region) {
  std::vector<PeerLoad> pool;
  for (const auto& p : peers)
    if (p.region.empty() || p.region == region) pool.push_back(p);
  return pool;
}

std::optional<std::string> choose_donor(const std::vector<PeerLoad>& peers_of_stage,
                                        const std::string& joiner_id,
                                        const std::map<std::string, int>& donations_in_progress) {
  const double fallback = unknown_throughput_estimate(peers_of_stage);
  struct Cand {
    const PeerLoad* peer;
    int donations;
    double load;
    uint64_t hash;
  };
  std::optional<Cand> best;
  for (const auto& p : peers_of_stage) {
    if (p.joining || p.peer_id == joiner_id) continue;
    const auto it = donations_in_progress.find(p.peer_id);
    Cand c{&p, it == donations_in_progress.end() ? 0 : std::max(it->second, 0),
           clean_queue(p.queue_length) / throughput_of(p, fallback),
           pair_hash(joiner_id, p.peer_id)};
    bool better = !best;
    if (best) {
      if (c.donations != best->donations) {
        better = c.donations < best->donations;
      } else if (int lc = cmp(c.load, best->load)) {
        better = lc < 0;
      } else if (c.hash != best->hash) {
        better = c.hash < best->hash;
      } else {
        better = c.peer->peer_id < best->peer->peer_id;
      }
    }
    if (better) best = c;
  }
  if (!best) return std::nullopt;
  return best->peer->peer_id;
}

std::vector<int> initial_assignment(int num_workers, int num_stages) {
  std::vector<int> out;
  if (num_workers <= 0 || num_stages <= 0) return out;
  out.reserve(static_cast<size_t>(num_workers));
  for (int i = 0; i < num_workers; ++i) out.push_back(i % num_stages);
  return out;
}

Rebalancer::Rebalancer(RebalanceOptions options) : options_(options) {
  if (!(options_.period_seconds >= 0) || !(options_.cooldown_seconds >= 0)) {
    throw std::invalid_argument("Rebalancer: period_seconds and cooldown_seconds must be >= 0");
  }
  if (options_.min_peers_per_stage < 1) {
    throw std::invalid_argument("Rebalancer: min_peers_per_stage must be >= 1");
  }
  if (!(options_.min_gain >= 0)) {
    throw std::invalid_argument("Rebalancer: min_gain must be >= 0");
  }
}

bool Rebalancer::in_cooldown(const std::string& peer_id, double now) const {
  const auto it = moved_at_.find(peer_id);
  return it != moved_at_.end() && now - it->second < options_.cooldown_seconds;
}

void Rebalancer::record_move(const Move& move, double now) { moved_at_[move.peer_id] = now; }

std::optional<Move> Rebalancer::plan(const std::vector<PeerLoad>& peers, int num_stages,
                                     double now) {
  if (num_stages < 2) return std::nullopt;
  if (last_move_at_ && now - *last_move_at_ < options_.period_seconds) return std::nullopt;
  for (auto it = moved_at_.begin(); it != moved_at_.end();) {  // forget expired cooldowns
    it = now - it->second >= options_.cooldown_seconds ? moved_at_.erase(it) : std::next(it);
  }
  const auto regions = regions_of(peers);
  std::optional<Move> m;
  if (regions.size() < 2) {
    m = plan_in(peers, num_stages, now, "");
  } else {
    // The region whose own pipeline is the slowest first (ties: by name, as regions_of sorts).
    std::vector<std::pair<double, std::string>> order;
    for (const auto& r : regions)
      order.emplace_back(bottleneck_throughput(stage_loads(region_pool(peers, r), num_stages, options_)), r);
    order_by(order, [](const auto& a, const auto& b) { return cmp(a.first, b.first) < 0; });
    for (const auto& [bottleneck, r] : order) {
      m = plan_in(region_pool(peers, r), num_stages, now, r);
      if (m) {
        m->reason = "region " + r + ": " + m->reason;
        break;
      }
    }
  }
  if (m) last_move_at_ = now;
  return m;
}

std::optional<Move> Rebalancer::plan_in(const std::vector<PeerLoad>& peers, int num_stages, double now,
                                        const std::string& region) const {
  const double fallback = unknown_throughput_estimate(peers);
  const std::vector<StageLoad> loads = stage_loads(peers, num_stages, options_);
  const StageLoad& target = loads[static_cast<size_t>(most_loaded_stage(loads, options_.min_gain))];
  const bool target_empty = target.peers == 0;
  // An empty stage stops the pipeline: filling it overrides the minimum, never emptying a source.
  const int keep = target_empty ? 1 : options_.min_peers_per_stage;
  const double required = (1 + options_.min_gain) * target.throughput;
  for (const StageLoad& src : source_stages(peers, loads, target.stage, keep, num_stages)) {
    for (const Candidate& c : movable_peers(peers, src, target, fallback, *this, now, region)) {
      const bool ok =
          target_empty || (cmp(c.pair, target.throughput) > 0 && cmp(c.pair, required) >= 0);
      if (!ok) continue;
      Move m = simulate_move(loads, src, target, c);
      m.reason = move_reason(src, target, c, options_.min_gain);
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace swarm::planner
