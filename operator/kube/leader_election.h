// LeaderElector: one active operator among replicas, through a coordination.k8s.io/v1 Lease.
//
// A candidate acquires the Lease when it does not exist, has no holder, or its record has not
// changed for lease_duration as observed on the candidate's own clock (so clock skew between
// replicas does not matter). The leader renews every retry_period; if its renewals keep failing
// for renew_deadline, or it finds another holder, it stops leading (on_stopped_leading; the
// process should exit, its caches may be stale). Every write is a PUT carrying the resourceVersion read, so two candidates can never
// both win: the loser gets 409. stop() while leading releases the Lease (empty holder), so the
// standby takes over within one retry_period instead of waiting out lease_duration.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "common/thread_annotations.h"
#include "operator/kube/client.h"

namespace swarm::kube {

struct LeaderElectionOptions {
  std::string namespace_ = "default";
  std::string name = "swarm-operator";
  std::string identity;  // unique per replica (pod name + random)
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionOptions options, std::function<void()> on_started_leading,
                std::function<void()> on_stopped_leading);
  ~LeaderElector();

  void start();
  // Stops campaigning; releases the Lease if held (without calling on_stopped_leading).
  void stop() EXCLUDES(mu_);
  bool is_leader() const { return leader_; }
  std::uint64_t transitions_seen() const { return transitions_; }

 private:
  void run() EXCLUDES(mu_);
  bool try_acquire_or_renew();
  void release();

  Client& client_;
  LeaderElectionOptions options_;
  std::function<void()> on_started_, on_stopped_;
  std::atomic<bool> leader_{false};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> transitions_{0};
  // The election thread's own state (run(), then stop() after the join): no lock.
  json observed_spec_;
  std::chrono::steady_clock::time_point observed_at_;
  std::string observed_rv_;
  json last_written_;        // the Lease as we last wrote it (renewals start from it)
  bool taken_over_ = false;  // the last attempt found another live holder
  // cv_ wakes run() from its retry wait when stop() sets stop_ (an atomic, set under mu_).
  swarm::Mutex mu_;
  swarm::CondVar cv_;
  std::thread thread_;
};

}  // namespace swarm::kube
