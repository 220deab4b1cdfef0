// A stage server's request queue: the requests connection threads hand to the compute thread, the
// order the compute thread takes them in (backward first, new work only as far as this peer's
// claim on the step allows: planner/step_book.h, Claims), the claim the waiting work asks for,
// and the requests it refuses, each with the reason.
//
// Thread-safe (one mutex, a leaf: nothing is called with it held). The clock stamps each request
// when it is queued and measures how long it waited.
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/thread_annotations.h"
#include "planner/step_book.h"
#include "worker/net/message.h"
#include "worker/runtime/clock.h"

namespace swarm::runtime {

// One queued request. The connection thread that received it waits on `reply`.
struct Task {
  net::Message request;
  nlohmann::json meta;
  std::promise<net::Message> reply;
  double enqueued_at = 0;
  int64_t admitted = 0;  // samples the compute thread admitted under its claim when it took it
};

// What the compute thread may take now (its state under its own lock, handed in: the queue never
// calls out with its lock held).
struct Admission {
  bool leaving = false;
  int64_t budget = 0;  // samples this peer may still admit this step: its claim less what it used
  // Microbatch ids whose activations this peer holds for the step: their backward needs no claim.
  std::set<std::string> activations;
};

// The claim the work waiting in the queue asks for, in the order take() admits it.
struct Demand {
  int64_t samples = 0;
  int64_t unit = 0;  // the smallest admission waiting (0: none)
  std::vector<planner::Transfer> transfers;  // retries naming the peer that held their work
};

class RequestQueue {
 public:
  // The most samples one forward or backward may carry.
  static constexpr int64_t kMaxSamplesPerRequest = 65536;

  // Work that is admitted into the step, under a claim: a forward or forward_backward (not an
  // eval one), and a backward that brings its stage input for activations this peer does not
  // hold (it recomputes the forward: a retry after a failure elsewhere, or activations that
  // expired).
  static bool needs_claim(const Task& t, const std::set<std::string>& activations);

  explicit RequestQueue(Clock clock);

  // Refuses (std::invalid_argument, saying why) a sample count outside [1, kMaxSamplesPerRequest].
  static void check_samples(int64_t samples);

  // Queues `task`, stamped with the clock.
  void push(std::shared_ptr<Task> task) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);
  bool empty() const EXCLUDES(mu_);

  // Whether take() would hand out a task now.
  bool has_eligible(const Admission& a) const EXCLUDES(mu_);
  // The next task to run, or null. Backwards of activations this peer holds (and state
  // requests) come first: they complete a microbatch and free its activations. A leaving peer
  // then takes any task (its new work is answered with an error at once, so trainers retry
  // elsewhere); otherwise eval forwards, then the work that needs a claim, recomputing backwards
  // first, in arrival order, while it fits `budget`. `*held` is set when work waits for a claim.
  std::shared_ptr<Task> take(const Admission& a, bool* held) EXCLUDES(mu_);
  // What the work waiting for a claim asks for (see take's order). A retry names the peer that
  // held its work in meta.from (the trainer sets it on failover).
  Demand demand(const std::set<std::string>& activations) const EXCLUDES(mu_);

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
