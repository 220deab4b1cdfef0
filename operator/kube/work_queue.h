// WorkQueue: the controller's queue of object keys, with client-go's guarantees:
//  - a key is queued at most once however often it is added (dirty set);
//  - a key is never processed by two workers at once: adding a key that is being processed marks
//    it dirty, and done() requeues it;
//  - add_rate_limited() delays a key by its own exponential backoff (base * 2^failures, capped),
//    forget() resets it after a success;
//  - add_after() delays without counting a failure (periodic resync, deadlines).
// Thread-safe. The clock is std::chrono::steady_clock.
#pragma once

#include <chrono>
#include <map>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "common/thread_annotations.h"

namespace swarm::kube {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkQueue(std::chrono::milliseconds base_delay = std::chrono::milliseconds(5),
                     std::chrono::milliseconds max_delay = std::chrono::seconds(60));

  void add(const std::string& key) EXCLUDES(mu_);
  void add_after(const std::string& key, Clock::duration delay) EXCLUDES(mu_);
  void add_rate_limited(const std::string& key) EXCLUDES(mu_);
  void forget(const std::string& key) EXCLUDES(mu_);
  // Every key waiting for its time (a rate-limited retry, a planned re-check) is ready now, and
  // the retries' backoff starts again from its first step: the API server answers again.
  void retry_waiting_now() EXCLUDES(mu_);
  int failures(const std::string& key) const EXCLUDES(mu_);
  // The delay add_rate_limited would use next for `key` (without adding).
  Clock::duration next_backoff(const std::string& key) const EXCLUDES(mu_);

  // Blocks until a key is ready or the queue shuts down (returns false). The caller must call
  // done(key) when finished with it.
  bool get(std::string& key) EXCLUDES(mu_);
  void done(const std::string& key) EXCLUDES(mu_);
  void shutdown() EXCLUDES(mu_);

  size_t depth() const EXCLUDES(mu_);        // keys ready to be processed
  size_t delayed() const EXCLUDES(mu_);        // keys waiting for their time

 private:
  void add_locked(const std::string& key) REQUIRES(mu_);
  void promote_due_locked(Clock::time_point now) REQUIRES(mu_);

  std::chrono::milliseconds base_, max_;
  mutable swarm::Mutex mu_;
  swarm::CondVar cv_;
  std::deque<std::string> queue_ GUARDED_BY(mu_);
  std::set<std::string> dirty_ GUARDED_BY(mu_);
  std::set<std::string> processing_ GUARDED_BY(mu_);
  std::multimap<Clock::time_point, std::string> waiting_ GUARDED_BY(mu_);
  std::map<std::string, Clock::time_point> waiting_at_ GUARDED_BY(mu_);  // earliest time per delayed key
  std::map<std::string, int> failures_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
};

}  // namespace swarm::kube
