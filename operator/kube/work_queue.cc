#include "operator/kube/work_queue.h"

#include <algorithm>

namespace swarm::kube {

WorkQueue::WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay)
    : base_(base_delay), max_(max_delay) {}

void WorkQueue::add_locked(const std::string& key) {
  if (shutdown_ || dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // done() will queue it
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::add(const std::string& key) {
  swarm::MutexLock lock(mu_);
  add_locked(key);
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
  if (delay <= Clock::duration::zero()) return add(key);
  swarm::MutexLock lock(mu_);
  if (shutdown_) return;
  const auto at = Clock::now() + delay;
  auto it = waiting_at_.find(key);
  if (it != waiting_at_.end()) {
    if (it->second <= at) return;  // an earlier wake-up is already planned
    for (auto w = waiting_.lower_bound(it->second); w != waiting_.end() && w->first == it->second; ++w) {
      if (w->second == key) {
        waiting_.erase(w);
        break;
      }
    }
  }
  waiting_at_[key] = at;
  waiting_.emplace(at, key);
  cv_.notify_all();
}

WorkQueue::Clock::duration WorkQueue::next_backoff(const std::string& key) const {
  swarm::MutexLock lock(mu_);
  auto it = failures_.find(key);
  const int n = it == failures_.end() ? 0 : it->second;
  const double d = static_cast<double>(base_.count()) * static_cast<double>(1ull << std::min(n, 40));
  return std::chrono::milliseconds(static_cast<long long>(std::min(d, static_cast<double>(max_.count()))));
}

void WorkQueue::add_rate_limited(const std::string& key) {
  const auto delay = next_backoff(key);
  {
    swarm::MutexLock lock(mu_);
    ++failures_[key];
  }
  add_after(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  swarm::MutexLock lock(mu_);
  failures_.erase(key);
}

void WorkQueue::retry_waiting_now() {
  swarm::MutexLock lock(mu_);
  for (const auto& [at, key] : waiting_) add_locked(key);
  waiting_.clear();
  waiting_at_.clear();
  failures_.clear();
}

int WorkQueue::failures(const std::string& key) const {
  swarm::MutexLock lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::promote_due_locked(Clock::time_point now) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    std::string key = waiting_.begin()->second;
    waiting_.erase(waiting_.begin());
    waiting_at_.erase(key);
    add_locked(key);
  }
}

bool WorkQueue::get(std::string& key) {
  swarm::MutexLock lock(mu_);
  for (;;) {
    promote_due_locked(Clock::now());
    if (!queue_.empty()) break;
    if (shutdown_) return false;
    if (waiting_.empty()) {
      cv_.wait(mu_);
    } else {
      const Clock::time_point next = waiting_.begin()->first;
      cv_.wait_until(mu_, next);
    }
  }
  key = queue_.front();
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return true;
}

void WorkQueue::done(const std::string& key) {
  swarm::MutexLock lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key)) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::shutdown() {
  swarm::MutexLock lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

size_t WorkQueue::depth() const {
  swarm::MutexLock lock(mu_);
  return queue_.size();
}

size_t WorkQueue::delayed() const {
  swarm::MutexLock lock(mu_);
  return waiting_.size();
}

}  // namespace swarm::kube
