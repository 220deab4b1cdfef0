#include "worker/stage/averaging_inbox.h"

#include <chrono>
#include <stdexcept>

#include "worker/net/errors.h"
#include "worker/runtime/protocol.h"

namespace swarm::runtime {

AveragingInbox::AveragingInbox(Clock clock) : clock_(std::move(clock)) {}

std::shared_ptr<const StepResult> AveragingInbox::gather(const Key& key,
                                                          const std::vector<std::string>& members,
                                                          const torch::Tensor& own,
                                                          int64_t own_samples, double deadline) {
  swarm::MutexLock lk(mu_);
  auto all_in = [&]() REQUIRES(mu_) {
    size_t got = 0;
    for (const auto& c : inbox_[key])
      for (const auto& m : members)
        if (m == c.peer) ++got;
    return got + 1 >= members.size();
  };
  cv_.wait_until(mu_, std::chrono::steady_clock::now() + to_ms(deadline - clock_()), all_in);
  auto result = std::make_shared<StepResult>();
  result->average = own.clone();
  result->samples = own_samples;
  result->members = 1;
  for (const auto& c : inbox_[key]) {
    if (c.flat.numel() != own.numel()) continue;
    result->average += c.flat;
    result->samples += c.samples;
    result->members += 1;
  }
  results_[key] = result;
  lk.unlock();
  cv_.notify_all();
  return result;
}

std::shared_ptr<const StepResult> AveragingInbox::contribute(const Key& key, Contribution c,
                                                              bool step_passed,
                                                              double timeout_seconds) {
  swarm::MutexLock lk(mu_);
  if (step_passed && !results_.count(key)) throw net::CodedError(net::ErrorCode::StepClosed, kStepClosed);
  inbox_[key].push_back(std::move(c));
  cv_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + to_ms(timeout_seconds);
  if (!cv_.wait_until(mu_, deadline, [&]() REQUIRES(mu_) { return results_.count(key) > 0 || stopped_; }) ||
      !results_.count(key))
    throw std::runtime_error("averaging step " + std::to_string(key.first) + " timed out at the leader");
  return results_[key];
}

void AveragingInbox::prune(int64_t step) {
  swarm::MutexLock lk(mu_);
  for (auto it = results_.begin(); it != results_.end();)
    it = it->first.first + 2 < step ? results_.erase(it) : std::next(it);
  for (auto it = inbox_.begin(); it != inbox_.end();)
    it = it->first.first + 2 < step ? inbox_.erase(it) : std::next(it);
}

void AveragingInbox::stop() {
  {
    swarm::MutexLock lk(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

}  // namespace swarm::runtime
