#include "registry/event_ledger.h"


namespace swarm::registry {

void EventLedger::add(const std::string& kind, int64_t count) {
  if (count <= 0) return;
  swarm::MutexLock lock(mu_);
  counted_[kind] += count;
  // An entry not yet sent takes more of its kind; the front, once sent, keeps its count and
  // sequence (the registry may have applied it already).
  for (size_t i = front_sent_ ? 1 : 0; i < queue_.size(); ++i) {
    if (queue_[i].kind == kind) {
      queue_[i].count += count;
      return;
    }
  }
  queue_.push_back(LedgerEntry{next_seq_++, kind, count});
}

bool EventLedger::flush(const Sender& send) {
  if (!flush_mu_.try_lock()) {
    swarm::MutexLock lock(mu_);
    return queue_.empty();
  }
  const bool empty = flush_locked(send);
  flush_mu_.unlock();
  return empty;
}

bool EventLedger::flush_locked(const Sender& send) {
  while (true) {
    LedgerEntry entry;
    {
      swarm::MutexLock lock(mu_);
      if (queue_.empty()) return true;
      front_sent_ = true;
      entry = queue_.front();
    }
    try {
      send(entry);
    } catch (...) {
      swarm::MutexLock lock(mu_);
      ++failed_sends_;
      return false;
    }
    swarm::MutexLock lock(mu_);
    queue_.pop_front();
    front_sent_ = false;
  }
}

std::map<std::string, int64_t> EventLedger::pending() const {
  swarm::MutexLock lock(mu_);
  std::map<std::string, int64_t> out;
  for (const auto& e : queue_) out[e.kind] += e.count;
  return out;
}

std::map<std::string, int64_t> EventLedger::counted() const {
  swarm::MutexLock lock(mu_);
  return counted_;
}

int64_t EventLedger::failed_sends() const {
  swarm::MutexLock lock(mu_);
  return failed_sends_;
}

}  // namespace swarm::registry
