// A stage server's request queue: the requests connection threads hand to the compute thread, the
// order the compute thread takes them in (backward first, new forwards only while the step admits
// samples), and the requests it refuses, each with the reason.
//
// Thread-safe (one mutex, a leaf: nothing is called with it held). The clock stamps each request
// when it is queued and measures how long it waited.
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/thread_annotations.h"
#include "worker/net/message.h"
#include "worker/runtime/clock.h"

namespace swarm::runtime {

// One queued request. The connection thread that received it waits on `reply`.
struct Task {
  net::Message request;
  nlohmann::json meta;
  std::promise<net::Message> reply;
  double enqueued_at = 0;
};

class RequestQueue {
 public:
  // The most samples one forward or backward may carry.
  static constexpr int64_t kMaxSamplesPerRequest = 65536;

  explicit RequestQueue(Clock clock);

  // Refuses (std::invalid_argument, saying why) a sample count outside [1, kMaxSamplesPerRequest].
  static void check_samples(int64_t samples);

  // Queues `task`, stamped with the clock.
  void push(std::shared_ptr<Task> task) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);
  bool empty() const EXCLUDES(mu_);

  // Whether take() would hand out a task now.
  bool has_eligible(bool leaving, bool admission_open) const EXCLUDES(mu_);
  // The next task to run, or null. Backwards (and state requests) come first:
  // they complete a microbatch and free its activations. A leaving peer then takes any task (its
  // forwards are answered with an error at once, so trainers retry elsewhere); otherwise eval
  // forwards, then new forwards only while `admission_open`. `*held` is set when the closed
  // admission decided the answer (nothing but new forwards could have been taken).
  std::shared_ptr<Task> take(bool leaving, bool admission_open, bool* held) EXCLUDES(mu_);

  // Answers with an error, without computing, the queued forwards whose caller has given up: they
  // waited past 90 % of its timeout (forward_seconds; forward_seconds + backward_seconds for a
  // forward_backward). Returns the message types of the requests refused.
  std::vector<uint16_t> expire_waiting(const TimeoutsSpec& timeouts) EXCLUDES(mu_);

  // Answers every queued task with the error `reason` and empties the queue.
  void fail_all(const std::string& reason) EXCLUDES(mu_);

 private:
  template <typename Pred>
  std::shared_ptr<Task> take_first_locked(Pred pred) REQUIRES(mu_);

  Clock clock_;
  mutable swarm::Mutex mu_;
  std::deque<std::shared_ptr<Task>> tasks_ GUARDED_BY(mu_);
};

}  // namespace swarm::runtime
