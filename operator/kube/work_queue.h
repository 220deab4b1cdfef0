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
#include <condition_variable>
#include <map>
#include <mutex>
#include <deque>
#include <set>
#include <string>
#include <vector>

namespace swarm::kube {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkQueue(std::chrono::milliseconds base_delay = std::chrono::milliseconds(5),
                     std::chrono::milliseconds max_delay = std::chrono::seconds(60));

  void add(const std::string& key);
  void add_after(const std::string& key, Clock::duration delay);
  void add_rate_limited(const std::string& key);
  void forget(const std::string& key);
  int failures(const std::string& key) const;
  // The delay add_rate_limited would use next for `key` (without adding).
  Clock::duration next_backoff(const std::string& key) const;

  // Blocks until a key is ready or the queue shuts down (returns false). The caller must call
  // done(key) when finished with it.
  bool get(std::string& key);
  void done(const std::string& key);
  void shutdown();

  size_t depth() const;          // keys ready to be processed
  size_t delayed() const;        // keys waiting for their time

 private:
  void add_locked(const std::string& key);
  void promote_due_locked(Clock::time_point now);

  std::chrono::milliseconds base_, max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_, processing_;
  std::multimap<Clock::time_point, std::string> waiting_;
  std::map<std::string, Clock::time_point> waiting_at_;  // earliest time per delayed key
  std::map<std::string, int> failures_;
  bool shutdown_ = false;
};

}  // namespace swarm::kube
