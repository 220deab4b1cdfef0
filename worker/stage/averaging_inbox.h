// The inbox of a step's averaging leader: the gradient sums the members of an averaging group push to it, and the
// result it answers every push with (worker/stage/averaging.cc has the protocol). Keyed by (step,
// attempt).
//
// Thread-safe (one mutex, a leaf: nothing is called with it held). The clock gives the leader's
// deadlines their meaning: a deadline is a reading of it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "common/thread_annotations.h"
#include "worker/runtime/clock.h"

namespace swarm::runtime {

// A peer's gradient sent to the step's leader.
struct Contribution {
  std::string peer;
  int64_t samples = 0;
  torch::Tensor flat;
};

struct StepResult {
  torch::Tensor average;  // the sum of the gradients (divided by `samples` when applied)
  int64_t samples = 0;
  int members = 0;
};

class AveragingInbox {
 public:
  using Key = std::pair<int64_t, int>;  // (step, attempt)

  explicit AveragingInbox(Clock clock);

  // The leader's side: waits until every other peer of `members` pushed, or until `deadline` (a
  // clock reading), then adds up its own gradient and every push of the right size, publishes
  // the sum as the key's result (the waiting pushes are answered with it) and returns it.
  std::shared_ptr<const StepResult> gather(const Key& key, const std::vector<std::string>& members,
                                            const torch::Tensor& own, int64_t own_samples,
                                            double deadline) EXCLUDES(mu_);

  // A member's push, on its connection thread: files `c` and waits up to `timeout_seconds` for
  // the key's result. Throws step_closed when `step_passed` (the leader stepped past the step)
  // and the step has no result; a push arriving after the result was published gets it still,
  // so the late member steps with the same update as the others (its own gradient is lost).
  std::shared_ptr<const StepResult> contribute(const Key& key, Contribution c, bool step_passed,
                                                double timeout_seconds) EXCLUDES(mu_);

  // Drops what the inbox holds of steps more than two behind `step`.
  void prune(int64_t step);
  // Answers the pushes waiting now and those to come with an error (the worker is stopping).
  void stop() EXCLUDES(mu_);

 private:
  Clock clock_;
  swarm::Mutex mu_;
  swarm::CondVar cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::map<Key, std::vector<Contribution>> inbox_ GUARDED_BY(mu_);
  std::map<Key, std::shared_ptr<const StepResult>> results_ GUARDED_BY(mu_);
};

}  // namespace swarm::runtime
