// Elastic swarm planning: where a new peer goes, whom it downloads its state from, and which peer
// moves to another stage when the stages are out of balance. Used by workers in local mode and by
// the Kubernetes operator. Pure: no I/O, no threads, no clock read (time is passed in as `now`
// seconds, any monotonic origin), deterministic (same inputs -> same answer; no std::hash, no
// randomness). Rebalancer is not thread-safe: the caller serializes access.
//
// Load model (SWARM paper). A stage's load = total queued work of its peers / their total
// throughput, i.e. roughly the seconds its backlog takes to drain. A peer's throughput is its
// measured samples_per_second (capacity: samples per second of compute, smoothed by the worker);
// an unknown one (0, negative, NaN, inf) is estimated as the median of the known peers in the same
// input list (a peer's speed is a property of its machine), or 1 when none is known. A stage with
// no peers has infinite load (it stops the whole pipeline).
//
// "Most loaded stage" (most_loaded_stage): queue lengths are instantaneous snapshots and swing
// with every microbatch, while capacity is a steady measurement, and in a pipeline every sample
// passes every stage, so the stage that caps throughput is the one with the least capacity. The
// most loaded stage is therefore taken among the stages whose throughput is within a band of
// min_gain above the lowest stage throughput (the bottleneck and the stages that tie with it within
// measurement noise): the highest queue/throughput among those; ties -> lower throughput, fewer
// peers, lowest index. A backlog on a stage clearly faster than the bottleneck is transient and
// never makes it the target. An empty stage always comes first (several: the lowest index).
//
// Joining peers (still downloading parameters + optimizer state) count in their stage like any
// peer: their capacity is committed there, so concurrent joiners spread over stages and the
// rebalancer does not send a second peer to a stage a joiner is already filling. They are never
// donors and never moved. Peers whose stage is outside [0, num_stages) are ignored (e.g. a joiner
// listed with stage -1). Peer ids are expected to be unique.
//
// Bottleneck throughput of an assignment = min over stages of the stage's total throughput (the
// pipeline runs at the pace of its slowest stage); 0 when a stage is empty.
//
// Regions (PeerLoad::region, the region a peer runs in; "" = none given). Trainers prefer a peer
// of their own region for every stage (planner/stage_router.h), so when the peers come from two
// regions or more each region runs a pipeline of its own, capped by its own slowest stage, and a
// stage a region lacks is served from another region over the slow link. Placement and moves then
// work per region: a region's pool is its peers plus the region-less ones (""), a joiner goes to
// the most loaded stage of its region's pool, and the rebalancer moves a peer between two stages
// of its own region (a peer cannot change region) - the region whose pool has the lowest
// bottleneck first. With fewer than two regions named, everything is as without regions.
//
// Floating-point ties: two values equal within a relative 1e-9 count as equal, so the documented
// tie rules apply even when sums were accumulated in a different order.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace swarm::planner {

struct RebalanceOptions {
  double period_seconds = 30;  // at most one move per period (see Rebalancer::plan)
  int min_peers_per_stage = 1;  // a move never leaves its source stage with fewer peers (>= 1)
  double min_gain = 0.25;  // hysteresis: move only if the bottleneck throughput rises by at least
                           // this fraction (see Rebalancer::plan for "bottleneck" with ties)
  double cooldown_seconds = 60;  // a peer that moved is not moved again this soon
  // Relative compute cost per sample of each stage (e.g. its FLOPs; any common unit). Used to
  // estimate a moved peer's speed on its new stage. Empty, missing or non-positive entries = 1.
  std::vector<double> stage_costs;
};

struct PeerLoad {
  std::string peer_id;
  int stage = -1;
  double queue_length = 0;        // samples waiting; negative / NaN / inf read as 0
  double samples_per_second = 0;  // measured throughput, 0 = unknown
  bool joining = false;           // still downloading its state: not serving yet
  std::string region;             // where it runs ("" = none given: counts in every region's pool)
};

struct StageLoad {
  int stage = 0;
  int peers = 0;            // joining peers included
  double throughput = 0;    // sum of the peers' (estimated) samples/s
  double queue = 0;         // sum of the peers' queue lengths
  double load = 0;          // queue / throughput; +infinity when peers == 0
};

struct Move {
  std::string peer_id;
  int from_stage = -1;
  int to_stage = -1;
  double bottleneck_before = 0;  // global bottleneck throughput before the move
  double bottleneck_after = 0;   // ... and after it (simulated); may equal before under ties
  std::string reason;            // human-readable, for logs and events
};

// The throughput assumed for a peer whose samples_per_second is unknown: the median of the known
// values in `peers` (mean of the two middle ones for an even count), or 1 when none is known.
double unknown_throughput_estimate(const std::vector<PeerLoad>& peers);

// One entry per stage, entry i for stage i. `options` is accepted for interface stability; the
// load model does not depend on it today.
std::vector<StageLoad> stage_loads(const std::vector<PeerLoad>& peers, int num_stages,
                                   const RebalanceOptions& options = {});

// min over `loads` of throughput (0 for an empty stage or an empty vector).
double bottleneck_throughput(const std::vector<StageLoad>& loads);

// The most loaded stage of `loads` (one entry per stage, as stage_loads returns), by the rule in
// the header comment, with `band` = the relative width of the bottleneck band (min_gain). -1 for
// an empty vector.
int most_loaded_stage(const std::vector<StageLoad>& loads, double band);

// The stage a new peer should serve: most_loaded_stage(stage_loads(peers), options.min_gain),
// over the pool of the joiner's `region` when it names one (see Regions above: its region's peers
// and the region-less ones). -1 when num_stages <= 0.
int choose_stage_for_joiner(const std::vector<PeerLoad>& peers, int num_stages,
                            const RebalanceOptions& options = {}, const std::string& region = "");

// The distinct non-empty regions of `peers`, sorted.
std::vector<std::string> regions_of(const std::vector<PeerLoad>& peers);

// The pool of `region`: the peers of that region and the region-less ones, in input order.
std::vector<PeerLoad> region_pool(const std::vector<PeerLoad>& peers, const std::string& region);

// The peer of a stage that `joiner_id` should download parameters + optimizer state from.
// Candidates: the peers of `peers_of_stage` that are not joining and are not the joiner itself.
// Preference: fewest donations in progress (`donations_in_progress[peer_id]`, absent = 0), then
// the lowest queue/throughput, then the lowest 64-bit FNV-1a+mix hash of (joiner_id, peer_id) —
// so different joiners facing equal donors pick different ones — then the lowest peer_id.
// nullopt when there is no candidate. The caller increments donations_in_progress[donor] for the
// duration of the transfer, which spreads simultaneous joiners over the donors.
std::optional<std::string> choose_donor(const std::vector<PeerLoad>& peers_of_stage,
                                        const std::string& joiner_id,
                                        const std::map<std::string, int>& donations_in_progress);

// Stage of each of `num_workers` workers started at once: round-robin (worker i -> i % num_stages)
// so every stage gets a peer before any gets a second. Empty when either argument is <= 0.
std::vector<int> initial_assignment(int num_workers, int num_stages);

// Decides at most one peer move per period.
//
// plan(peers, num_stages, now):
//  * nothing for num_stages < 2 (a single-stage swarm never moves);
//  * nothing while now - (time of the last plan() that returned a move) < period_seconds. The
//    period starts at the first move, not at construction: the first call may move at any time
//    (a freshly started swarm with an empty stage must not idle a full period);
//  * target = most_loaded_stage(loads, min_gain): an empty stage first; else, among the stages
//    within min_gain of the lowest stage throughput, the highest load (ties -> lower throughput,
//    fewer peers, lowest index).
//  * source stages: every other stage that, after losing one peer, keeps >= min_peers_per_stage
//    peers — or, when the target is empty, keeps >= 1 peer (an empty stage stops the whole
//    pipeline, so filling it overrides the minimum but never by emptying another stage) — and in
//    any case keeps >= 1 peer that is not joining. Tried least loaded first: lowest load; ties ->
//    higher throughput, then more peers, then lowest index.
//  * movable peers of a source: not joining, not moved (record_move) within cooldown_seconds.
//    Tried least loaded first: lowest queue/throughput; ties -> the peer whose move leaves the
//    better min(source, target) throughput, then lowest peer_id.
//  * simulation: a peer's speed is its machine's speed divided by its stage's cost per sample, so
//    the moved peer serves the target at its throughput times stage_costs[source] /
//    stage_costs[target] (equal costs when not given). Its queue stays behind (it is drained or
//    re-routed by the trainers).
//  * acceptance (hysteresis): with T = the target's throughput before, the move is returned iff
//    min(source after, target after) >= (1 + min_gain) * T and > T. This is the bottleneck of the
//    two stages the move touches; the global bottleneck never falls (both new values exceed T,
//    which is >= the global minimum), and when several stages tie as the slowest, each accepted
//    move removes one of them, so a sequence of moves raises the global bottleneck (e.g. 4/1/1
//    equal peers -> 3/2/1 -> 2/2/2). Every accepted move strictly raises the ascending-sorted
//    vector of stage throughputs lexicographically, so with fixed speeds moves stop: no flapping.
//    An empty target (T = 0) always accepts.
//  The first acceptable candidate (source stages in order, peers in order) is returned, and the
//  period restarts at `now` whether or not the caller carries the move out; the cooldown starts
//  only with record_move().
//  * regions: with two regions or more among `peers`, all of the above runs on each region's pool
//    (its peers and the region-less ones), regions tried by ascending pool bottleneck (ties: name),
//    and only a peer of that region moves; the reason names the region.
class Rebalancer {
 public:
  // Throws std::invalid_argument for period/cooldown < 0, min_peers_per_stage < 1, min_gain < 0
  // (or NaN).
  explicit Rebalancer(RebalanceOptions options = {});

  std::optional<Move> plan(const std::vector<PeerLoad>& peers, int num_stages, double now);

  // The move was carried out at `now`: its peer is in cooldown until now + cooldown_seconds.
  void record_move(const Move& move, double now);

  // Whether `peer_id` is still in cooldown at `now`.
  bool in_cooldown(const std::string& peer_id, double now) const;

  const RebalanceOptions& options() const { return options_; }

 private:
  // plan's rule on one pool of peers; with `region`, only a peer of that region moves.
  std::optional<Move> plan_in(const std::vector<PeerLoad>& peers, int num_stages, double now,
                              const std::string& region) const;

  RebalanceOptions options_;
  std::optional<double> last_move_at_;      // time of the last plan() that returned a move
  std::map<std::string, double> moved_at_;  // peer -> time of its last recorded move
};

}  // namespace swarm::planner
