// PeerListing: the JSON text of GET /v1/peers answers, kept per peer, so that a listing is a
// concatenation of ready-made record texts rather than a serialization of every record it lists.
// Every worker's heartbeat reads its stage's list: at 1,000 peers, serializing 250 records per
// read saturated the registry's core (bench/registry/registry_load.sh, --peer-lists).
//
// A record's text is made once per put() (a heartbeat: the peer's own record, whatever changed in
// it) and reused by every listing until the next put() or erase() of that peer. Only "lastSeen"
// is written per listing, since it is reported in Unix time at the moment of the read.
//
// Invariants:
//  - RegistryService keeps one entry per record its PeerTable stores: put() after every upsert,
//    erase() after every remove and for every record expire() drops. Right after
//    PeerTable::expire(now), render(role, stage, now, unix) is byte for byte the reply that
//    serializing PeerTable::live(now, role, stage) with wire::to_json would give ({"peers": [...]},
//    lastSeen = unix - (now - last_seen)).
//  - by_stage_ indexes exactly the entries of all_, each under its record's stage.
// Not thread-safe: RegistryService calls it with its mutex (mu_) held.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "planner/peer_table.h"

namespace swarm::registry {

class PeerListing {
 public:
  // Stores the text of `rec` as seen at `now` (its last_seen), replacing the peer's previous one.
  void put(const planner::PeerRecord& rec, double now);
  void erase(const std::string& peer_id);

  // {"peers":[...]}: the stored records with `role` ("" = any) and `stage` (-1 = any), sorted by
  // peer id, each one's lastSeen reported as `unix_now - (now - last_seen)`.
  std::string render(const std::string& role, int stage, double now, double unix_now) const;

  size_t size() const { return all_.size(); }

 private:
  struct Entry {
    std::string role;
    int stage = -1;
    double last_seen = 0;
    std::string head;  // the record's JSON text up to and including "lastSeen":
    std::string tail;  // the rest, after lastSeen's value
  };
  void append(std::string& out, const Entry& e, double now, double unix_now) const;

  std::map<std::string, Entry> all_;                               // by peer id
  std::map<int, std::map<std::string, const Entry*>> by_stage_;  // stage -> peer id -> all_'s entry
};

}  // namespace swarm::registry
