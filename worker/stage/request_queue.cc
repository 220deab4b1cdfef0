#include "worker/stage/request_queue.h"

#include <stdexcept>

#include <spdlog/fmt/fmt.h>

#include "worker/runtime/protocol.h"

namespace swarm::runtime {
namespace {

// Requests that complete work the peer already holds (or ask for its state): never held back.
bool completes_work(const Task& t) {
  return t.request.type == net::Backward || t.request.type == net::StateRequest;
}

bool is_eval(const Task& t) { return meta_bool(t.meta, "eval", false); }

}  // namespace

RequestQueue::RequestQueue(Clock clock) : clock_(std::move(clock)) {}

void RequestQueue::check_samples(int64_t samples) {
  if (samples < 1 || samples > kMaxSamplesPerRequest)
    throw std::invalid_argument("meta.samples: must be in [1, " + std::to_string(kMaxSamplesPerRequest) +
                                "], got " + std::to_string(samples));
}

void RequestQueue::push(std::shared_ptr<Task> task) {
  task->enqueued_at = clock_();
  swarm::MutexLock lk(mu_);
  tasks_.push_back(std::move(task));
}

size_t RequestQueue::size() const {
  swarm::MutexLock lk(mu_);
  return tasks_.size();
}

bool RequestQueue::empty() const {
  swarm::MutexLock lk(mu_);
  return tasks_.empty();
}

bool RequestQueue::has_eligible(bool leaving, bool admission_open) const {
  swarm::MutexLock lk(mu_);
  if (leaving && !tasks_.empty()) return true;
  for (const auto& t : tasks_)
    if (completes_work(*t) || is_eval(*t)) return true;
  return !tasks_.empty() && admission_open;
}

template <typename Pred>
std::shared_ptr<Task> RequestQueue::take_first_locked(Pred pred) {
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    if (pred(**it)) {
      auto t = *it;
      tasks_.erase(it);
      return t;
    }
  }
  return nullptr;
}

std::shared_ptr<Task> RequestQueue::take(bool leaving, bool admission_open, bool* held) {
  auto any = [](const Task&) { return true; };
  if (held) *held = false;
  swarm::MutexLock lk(mu_);
  if (auto t = take_first_locked(completes_work)) return t;
  if (leaving) return take_first_locked(any);
  if (auto t = take_first_locked(is_eval)) return t;
  // A new forward is admitted only while the step still needs samples: once admitted work
  // covers the global batch, later forwards wait for the optimizer step (they would otherwise be
  // computed with parameters that the step is about to change).
  if (!admission_open) {
    if (held) *held = true;
    return nullptr;
  }
  return take_first_locked(any);
}

std::vector<uint16_t> RequestQueue::expire_waiting(const TimeoutsSpec& to) {
  std::vector<uint16_t> refused;
  const double now = clock_();
  swarm::MutexLock lk(mu_);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const auto type = (*it)->request.type;
    double limit = 0;
    if (type == net::Forward) limit = to.forward_seconds;
    else if (type == net::ForwardBackward) limit = to.forward_seconds + to.backward_seconds;
    const double waited = now - (*it)->enqueued_at;
    if (limit > 0 && waited > 0.9 * limit) {
      (*it)->reply.set_value(net::make_error(
          (*it)->request.request_id,
          fmt::format("waited {:.1f} s in the queue, past its caller's timeout "
                      "(spec.timeouts.forwardSeconds {}): not computed",
                      waited, to.forward_seconds)));
      refused.push_back(type);
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
  return refused;
}

void RequestQueue::fail_all(const std::string& reason) {
  swarm::MutexLock lk(mu_);
  for (auto& t : tasks_) t->reply.set_value(net::make_error(t->request.request_id, reason));
  tasks_.clear();
}

}  // namespace swarm::runtime
