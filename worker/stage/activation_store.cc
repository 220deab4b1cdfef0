#include "worker/stage/activation_store.h"

namespace swarm::runtime {

ActivationStore::ActivationStore(Clock clock, double ttl_seconds, size_t max_entries)
    : clock_(std::move(clock)), ttl_(ttl_seconds), max_entries_(max_entries) {}

void ActivationStore::put(const std::string& mb, torch::Tensor input, torch::Tensor output,
                          int64_t samples, int64_t step) {
  const double now = clock_();
  swarm::MutexLock lk(mu_);
  auto& slot = entries_[mb];
  samples_ += samples - slot.samples;
  slot = Activation{std::move(input), std::move(output), samples, step, now};
}

std::optional<Activation> ActivationStore::take(const std::string& mb) {
  swarm::MutexLock lk(mu_);
  auto it = entries_.find(mb);
  if (it == entries_.end()) return std::nullopt;
  Activation act = std::move(it->second);
  entries_.erase(it);
  samples_ -= act.samples;
  return act;
}

size_t ActivationStore::expire(int64_t* samples) {
  const double now = clock_();
  swarm::MutexLock lk(mu_);
  size_t dropped = 0;
  if (samples) *samples = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now - it->second.created_at > ttl_ || entries_.size() > max_entries_) {
      samples_ -= it->second.samples;
      if (samples) *samples += it->second.samples;
      it = entries_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

int64_t ActivationStore::clear() {
  swarm::MutexLock lk(mu_);
  const int64_t samples = samples_;
  entries_.clear();
  samples_ = 0;
  return samples;
}

std::set<std::string> ActivationStore::ids(int64_t step) const {
  std::set<std::string> out;
  swarm::MutexLock lk(mu_);
  for (const auto& [mb, a] : entries_)
    if (a.step == step) out.insert(mb);
  return out;
}

size_t ActivationStore::size() const {
  swarm::MutexLock lk(mu_);
  return entries_.size();
}

bool ActivationStore::empty() const {
  swarm::MutexLock lk(mu_);
  return entries_.empty();
}

int64_t ActivationStore::samples() const {
  swarm::MutexLock lk(mu_);
  return samples_;
}

}  // namespace swarm::runtime
