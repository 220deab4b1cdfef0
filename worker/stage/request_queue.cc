#include "worker/stage/request_queue.h"

#include <algorithm>
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

// A backward that comes with its stage input for activations this peer does not hold: it
// recomputes the forward. Without the input it only fails (activation_missing), at once.
bool recomputes(const Task& t, const std::set<std::string>& activations) {
  return t.request.type == net::Backward && t.request.tensors.size() >= 2 &&
         !activations.count(t.meta.value("mb", std::string()));
}

int64_t samples_of(const Task& t) { return t.meta.value("samples", int64_t{0}); }

}  // namespace

bool RequestQueue::needs_claim(const Task& t, const std::set<std::string>& activations) {
  if (t.request.type == net::Forward || t.request.type == net::ForwardBackward) return !is_eval(t);
  return recomputes(t, activations);
}

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

bool RequestQueue::has_eligible(const Admission& a) const {
  swarm::MutexLock lk(mu_);
  if (a.leaving && !tasks_.empty()) return true;
  for (const auto& t : tasks_)
    if ((completes_work(*t) && !recomputes(*t, a.activations)) || is_eval(*t)) return true;
  for (bool recompute : {true, false})  // the first work needing a claim decides, as in take()
    for (const auto& t : tasks_)
      if (needs_claim(*t, a.activations) && recomputes(*t, a.activations) == recompute)
        return samples_of(*t) <= a.budget;
  return false;
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

std::shared_ptr<Task> RequestQueue::take(const Admission& a, bool* held) {
  auto any = [](const Task&) { return true; };
  if (held) *held = false;
  swarm::MutexLock lk(mu_);
  if (auto t = take_first_locked([&](const Task& x) { return completes_work(x) && !recomputes(x, a.activations); }))
    return t;
  if (a.leaving) return take_first_locked(any);
  if (auto t = take_first_locked(is_eval)) return t;
  // Work that needs a claim is admitted only as far as this peer's claim on the step goes: the
  // stage's claims add up to the global batch exactly (planner/step_book.h). Later work waits for
  // the next claim, or for the optimizer step (it would otherwise be computed with parameters the
  // step is about to change). Recomputes first: they finish microbatches already under way.
  for (bool recompute : {true, false}) {
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
      if (!needs_claim(**it, a.activations) || recomputes(**it, a.activations) != recompute) continue;
      if (samples_of(**it) > a.budget) {
        if (held) *held = true;
        return nullptr;
      }
      auto t = *it;
      tasks_.erase(it);
      return t;
    }
  }
  return nullptr;
}

Demand RequestQueue::demand(const std::set<std::string>& activations) const {
  Demand d;
  swarm::MutexLock lk(mu_);
  for (bool recompute : {true, false}) {
    for (const auto& t : tasks_) {
      if (!needs_claim(*t, activations) || recomputes(*t, activations) != recompute) continue;
      const int64_t n = samples_of(*t);
      d.samples += n;
      d.unit = d.unit == 0 ? n : std::min(d.unit, n);
      const auto from = t->meta.find("from");
      if (from != t->meta.end() && from->is_string()) d.transfers.push_back({from->get<std::string>(), n});
    }
  }
  return d;
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
