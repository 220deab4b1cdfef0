// ProgressPoller: reads every running SwarmJob's registry on its own threads, off the reconcile
// path. Every `period_seconds` it asks `targets()` which jobs to read (Running or Degraded, with
// the registry URL of each), GETs /v1/peers?role=worker and /v1/stats from each with
// `timeout_seconds` per request (through RegistryClient, the same client workers use), folds the
// replies into the job's JobProgress (progress.h, pure) and keeps the latest Reading per job.
// When a reading differs from the previous one (figures, or the error) it calls `changed(key)`:
// the controller enqueues the job, and the reconcile writes the figures into status (one writer
// of status; a status write only when something changed). Its requests are signed with the job's
// secret, as every peer's are (ProgressTarget::secret).
//
// Concurrency: up to `concurrency` registries are read at once, so one registry that times out
// delays only its own job's figures. latest() never blocks on I/O. stop() waits for the requests
// in flight (at most timeout_seconds each), never starts another.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"
#include "operator/controller/progress.h"

namespace swarm::op {

struct ProgressPollerOptions {
  // 10 s: status is for people and dashboards (kubectl get swarmjobs); the registry answers from
  // memory, so 50 jobs cost 10 small GETs a second.
  double period_seconds = 10;
  double timeout_seconds = 3;     // per request; a registry slower than this counts as unreachable
  double window_seconds = 60;     // samples/s is the step advance over this long
  int concurrency = 4;
  std::string url_template = kDefaultRegistryUrlTemplate;
};

struct ProgressTarget {
  std::string key;       // namespace/name
  std::string uid;       // a job recreated under the same name starts afresh
  std::string base_url;  // registry_url_for(job)
  int stages = 2;
  std::int64_t global_batch = 64;
  // The job secret, which signs every request to the registry (registry/request_auth.h), as its
  // pods get it (JobSecrets); when it could not be read, secret_error says why and the job's
  // reading fails with RegistrySecretUnreadable.
  std::string secret{};
  std::string secret_error{};
};

// ProgressReading: progress.h.
class ProgressPoller {
 public:
  using Targets = std::function<std::vector<ProgressTarget>()>;
  using Changed = std::function<void(const std::string& key)>;
  // Called after every read with "ok" or the error reason (for metrics); may be empty.
  using Observed = std::function<void(const std::string& result)>;

  ProgressPoller(ProgressPollerOptions options, Targets targets, Changed changed, Observed observed = {});
  ~ProgressPoller();

  void start() EXCLUDES(mu_);
  void stop() EXCLUDES(mu_);

  // The latest reading of a job, if it was read at all.
  std::optional<ProgressReading> latest(const std::string& key) const EXCLUDES(mu_);

 private:
  void loop() EXCLUDES(mu_);
  void poll_one(const ProgressTarget& t) EXCLUDES(mu_);

  ProgressPollerOptions options_;
  Targets targets_;
  Changed changed_;
  Observed observed_;
  mutable swarm::Mutex mu_;
  swarm::CondVar cv_;
  std::map<std::string, ProgressReading> readings_ GUARDED_BY(mu_);
  std::map<std::string, std::string> uids_ GUARDED_BY(mu_);
  // Per job: its registry's clock minus ours (ms), as its last replies said. Each poll's client
  // signs with it, so an operator whose clock is off has one request refused per job, not one a poll.
  std::map<std::string, int64_t> clock_offsets_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace swarm::op
