// StageRouter: stochastic wiring for one pipeline stage, as seen by one trainer.
//
// For every microbatch the trainer asks which peer of the stage should serve it. Peers are chosen
// by interleaved weighted round-robin over their measured throughput: each peer has a virtual
// clock; pick_peer() returns the eligible peer with the smallest virtual time and advances it by
// the work just assigned (EMA seconds/sample x samples x backward_weight for a backward). Over
// time every peer's share of work is proportional to 1/EMA, and picks interleave (no bursts).
//
// Measurements are the trainer's round trips (queueing included) divided by the samples; a
// backward measurement is divided by backward_weight, so both ops feed one forward-equivalent EMA.
// Failures ban a peer for ban_seconds, doubling per consecutive failure up to max_ban_seconds.
//
// Regions: a peer outside the trainer's home region costs inter_region_penalty_seconds more when
// picks are compared (its virtual time plus the penalty), on top of its measured round trips, which
// already hold the inter-region RTT. So a remote peer is picked only when every home peer's virtual
// time leads the schedule by more than the penalty (home is congested or slow), when no home peer
// is eligible (banned, excluded, none registered: failover across regions), or once to measure it
// (exploration). Region "" is every region's home: it never pays the penalty, nor does any peer of
// a trainer whose home is "". A penalty of 0 is the region-blind router.
//
// Pure: no I/O, no threads, the clock is passed in (`now`, seconds). Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/thread_annotations.h"

namespace swarm::planner {

enum class Op { Forward, Backward };

struct RouterOptions {
  double ema_alpha = 0.1;              // weight of the newest seconds-per-sample measurement
  double backward_weight = 2.0;        // a backward sample costs this many forward samples
  double explore_peer_seconds = 10;    // an unmeasured peer is picked at least this often
  double ban_seconds = 2;              // first ban after a failure
  double max_ban_seconds = 30;         // cap of the doubling ban
  std::string home_region;             // the trainer's region; "" = every region is home
  double inter_region_penalty_seconds = 0;  // added to a remote peer's cost when picks compare
};

// Whether a hop between peers of regions `a` and `b` crosses regions ("" is every region's home).
bool crosses_regions(const std::string& a, const std::string& b);

// What a trainer that is about to start sees of one stage's workers (may_start_routing).
struct StageCoverage {
  int routable = 0;      // serving (or averaging): a pick may go there
  int home_routable = 0;  // of them, in the trainer's home region (or region-less)
  int home_joining = 0;   // home-region workers registered but not yet routable (downloading state)
};

// How long a starting trainer waits for a home-region worker that is still joining before it
// sends that stage's work abroad: a joiner downloads the stage's state from a live peer (a
// fraction of a second for small stages, a few seconds for large ones on a fast link). Started at
// once, a trainer whose home peer came up 80 ms after the other region's sent its first ~10
// microbatches abroad, 8 % of a 30-step run (LocalRunRegions, under stress-ng, 2026-12-07).
constexpr double kHomeJoinerGraceSeconds = 10;

// Whether a trainer may start sending microbatches: every stage has a routable worker and, until
// `home_grace_passed`, no stage lacks a routable home worker while one of its home workers joins.
// A stage with no home worker registered at all routes abroad from the start (failover across
// regions is the only way).
bool may_start_routing(const std::vector<StageCoverage>& stages, bool home_grace_passed);

// A peer of the stage as discovery lists it.
struct PeerCandidate {
  std::string id;
  std::string region;  // "" = every region's home
};

struct PeerStats {
  std::string peer_id;
  std::string region;
  bool remote = false;            // outside the home region: pays the penalty
  double seconds_per_sample = 0;  // EMA, forward-equivalent; 0 = not measured
  int64_t picks = 0;
  int64_t failures = 0;
  bool banned = false;            // banned as of the latest `now` the router has seen
  double banned_until = 0;
};

class StageRouter {
 public:
  explicit StageRouter(RouterOptions options = {});

  // Replaces the peer set: peers still present keep their stats, new ones are added (virtual time
  // = the current minimum, so they are tried promptly), gone ones are dropped. Duplicates ignored.
  void set_peers(const std::vector<std::string>& peer_ids, double now) EXCLUDES(mu_);
  // set_peers with each peer's region (a peer whose region changed keeps its stats).
  void set_candidates(const std::vector<PeerCandidate>& peers, double now) EXCLUDES(mu_);
  // Whether a peer of `region` is outside this router's home region.
  bool is_remote(const std::string& region) const;

  // The peer that should serve `samples` samples of `op`, never one in `exclude`. Banned peers are
  // skipped unless every non-excluded peer is banned; then the one whose ban ends first is
  // returned. nullopt only when every peer is excluded (or there are none).
  std::optional<std::string> pick_peer(Op op, int64_t samples, double now,
                                       const std::vector<std::string>& exclude = {}) EXCLUDES(mu_);

  // A request to `peer` for `samples` samples took `seconds` (round trip, queueing included).
  // Updates the EMA and resets the ban doubling. Unknown peers are ignored.
  void report_success(const std::string& peer, Op op, int64_t samples, double seconds, double now)
      EXCLUDES(mu_);

  // A request to `peer` failed (error, timeout, refused): ban it for a doubling duration.
  void report_failure(const std::string& peer, double now) EXCLUDES(mu_);

  std::vector<PeerStats> stats() const EXCLUDES(mu_);  // in set_peers order
  size_t size() const EXCLUDES(mu_);
  const RouterOptions& options() const { return options_; }

 private:
  struct Peer {
    std::string id;
    std::string region;
    bool remote = false;       // is_remote(region)
    double ema = 0;            // forward-equivalent seconds per sample; 0 = not measured
    bool measured = false;
    double vtime = 0;          // virtual clock
    double explore_at = 0;     // while unmeasured: picked regardless once now >= explore_at
    int64_t picks = 0;
    int64_t failures = 0;
    int consecutive_failures = 0;
    double banned_until = 0;
  };

  Peer* find(const std::string& id) REQUIRES(mu_);
  double unmeasured_cost() const REQUIRES(mu_);  // median EMA of measured peers, or 1
  void observe(double now) REQUIRES(mu_);

  RouterOptions options_;
  mutable swarm::Mutex mu_;
  std::vector<Peer> peers_ GUARDED_BY(mu_);
  double system_vtime_ GUARDED_BY(mu_) = 0;  // virtual time of the latest pick (start-time fair queueing)
  double latest_now_ GUARDED_BY(mu_) = 0;    // the latest clock value seen; used by stats()
};

}  // namespace swarm::planner
