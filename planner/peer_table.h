// PeerTable: the registry's soft-state view of who is in a job. Pure: no I/O, the clock is passed
// in as `now` (seconds, any monotonic origin). A record stays live for `expiry_seconds` after its
// last upsert; peers keep themselves alive by re-announcing (heartbeats).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/peer_state.h"

namespace swarm::planner {

struct PeerRecord {
  std::string peer_id;
  std::string role;  // "worker" | "trainer"
  int stage = -1;    // the stage a worker serves; -1 for trainers
  std::string host;
  int port = 0;
  int metrics_port = 0;
  // The region the peer runs in (--region / SWARM_REGION; the operator sets it from the node
  // pool's). "" = none given: every region's home, so region-blind peers route as before.
  std::string region;
  PeerState state = PeerState::Joining;  // the wire's default when a heartbeat names none
  int64_t step = 0;
  int64_t queue_length = 0;
  double samples_per_second = 0;  // worker: capacity; trainer: samples trained per second
  double loss = 0;                // trainer: mean training loss of its last global batch; 0 = unknown
  double last_seen = 0;  // set by PeerTable::upsert to `now`
};

class PeerTable {
 public:
  explicit PeerTable(double expiry_seconds);

  // Inserts or replaces the record of `rec.peer_id`; its last_seen becomes `now`.
  void upsert(PeerRecord rec, double now);
  // Forgets a peer at once. Returns whether it was known (live or not yet expired away).
  bool remove(const std::string& id);

  // Live peers (now - last_seen <= expiry), optionally filtered by role ("" = any) and
  // stage (-1 = any), sorted by peer_id.
  std::vector<PeerRecord> live(double now, const std::string& role = "", int stage = -1) const;
  bool is_live(const std::string& id, double now) const;
  // The record of a live peer, if any.
  std::optional<PeerRecord> find(const std::string& id, double now) const;
  // The stored record of `id`, live or not yet expired away.
  std::optional<PeerRecord> stored(const std::string& id) const;
  // Drops every record that is no longer live; returns the dropped records (sorted by peer_id).
  std::vector<PeerRecord> expire(double now);

  double expiry_seconds() const { return expiry_seconds_; }
  // Number of stored records, live or not yet expired away.
  size_t size() const { return peers_.size(); }

 private:
  bool alive(const PeerRecord& rec, double now) const;

  double expiry_seconds_;
  std::map<std::string, PeerRecord> peers_;  // ordered: live() comes out sorted by peer_id
};

}  // namespace swarm::planner
