// EventLedger: a peer's counted events (resyncs, hand-offs, unaveraged steps, samples lost, ...)
// on their way to the registry, kept until the registry has counted them.
//
// A count sent once and dropped when the call failed was lost exactly when it mattered most (a
// registry restarting mid-step is the case unaveraged_steps exists for). Here every count waits
// in the ledger until a send is acknowledged; a send that failed is sent again, with the same
// sequence number, so a registry that did count it before the reply was lost counts it once
// (the registry keeps each peer's highest sequence applied: registry_service.h, POST /v1/events).
//
// Order: entries go out one at a time, oldest first, and a newer one only after the older is
// acknowledged, so "highest sequence applied" is exact. Unsent counts of one kind merge, so the
// ledger holds at most one entry per kind plus the one in flight: bounded however long the
// registry is away. Thread-safe; flush() calls the sender with no lock held, one flush at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "common/thread_annotations.h"

namespace swarm::registry {

struct LedgerEntry {
  int64_t seq = 0;  // 1, 2, ...: per peer, never reused
  std::string kind;
  int64_t count = 0;
};

class EventLedger {
 public:
  // Sends one entry; returns normally when the registry counted it (or had counted it before),
  // throws when it is not known to have.
  using Sender = std::function<void(const LedgerEntry&)>;

  // Adds `count` (> 0; other values are ignored) occurrences of `kind`.
  void add(const std::string& kind, int64_t count) EXCLUDES(mu_);
  // Sends the entries in order until one fails or none is left; true when the ledger is empty.
  // A flush already running in another thread makes this one return at once (false unless empty).
  bool flush(const Sender& send) EXCLUDES(mu_, flush_mu_);

  // Counts not yet acknowledged by the registry, by kind (for logs and the peer's report).
  std::map<std::string, int64_t> pending() const EXCLUDES(mu_);
  // Everything ever added, by kind: the peer's own count, whatever the registry heard.
  std::map<std::string, int64_t> counted() const EXCLUDES(mu_);
  // Sends that failed (each is retried).
  int64_t failed_sends() const EXCLUDES(mu_);

 private:
  bool flush_locked(const Sender& send) REQUIRES(flush_mu_) EXCLUDES(mu_);

  mutable swarm::Mutex mu_;
  swarm::Mutex flush_mu_;  // one flush at a time: a newer entry never overtakes an older one
  std::deque<LedgerEntry> queue_ GUARDED_BY(mu_);  // front: the oldest (in flight while a flush runs)
  bool front_sent_ GUARDED_BY(mu_) = false;        // the front went out at least once: it no longer merges
  int64_t next_seq_ GUARDED_BY(mu_) = 1;
  std::map<std::string, int64_t> counted_ GUARDED_BY(mu_);
  int64_t failed_sends_ GUARDED_BY(mu_) = 0;
};

}  // namespace swarm::registry
