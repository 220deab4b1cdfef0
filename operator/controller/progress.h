// Job progress: what a SwarmJob's registry knows about its training, turned into .status figures.
// Pure: no I/O, the clock is passed in as `now` (seconds, any monotonic origin). The poller
// (progress_poller.h) does the HTTP and hands the replies here.
//
// Where the figures come from (the registry's REST API, registry/registry_service.h):
//   GET /v1/peers?role=worker  every live worker's last heartbeat: stage, state, step (= optimizer
//                              steps its stage has taken), samplesPerSecond (capacity: samples per
//                              compute-second), queueLength
//   GET /v1/stats              {"rebalanceMoves", "events": {kind: count}, "assignments", and, only
//                              when the job has failed, "failure": {"reason": "StageReset",
//                              "stage": S, "step": N, "message": "..."}}
// and how they are read:
//   stage step        the largest step among the stage's live workers (a peer that is behind
//                     re-syncs; the stage has taken as many steps as its most advanced peer)
//   job step          the smallest stage step: the swarm has taken a step when every stage has
//                     (a trainer stops on the same rule)
//   stage samples/s   the sum of its live, non-joining workers' capacities
//   job samples/s     samples trained per second: step advance × globalBatch over a sliding window
//                     of readings (window_seconds), 0 until two readings span some time
//   GET /v1/peers?role=trainer every live trainer's heartbeat; `loss` = the mean training loss of
//                              its last global batch (0 = none yet)
//   loss              the mean of the live trainers' losses (those above 0); when no trainer
//                     reports one, status.loss keeps its last value
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/status.h"
#include "planner/peer_table.h"

namespace swarm::op {

struct StageProgress {
  int stage = 0;
  std::int64_t step = 0;
  int live_workers = 0;              // in the registry (joining ones included, failed ones not)
  double samples_per_second = 0;     // capacity of the serving workers
  std::int64_t queue_length = 0;
};

// A failure the registry reports for the whole job (e.g. StageReset: a stage lost its last peer
// and came back without its state).
struct JobFailure {
  std::string reason;   // CamelCase, e.g. StageReset
  int stage = -1;       // -1: not given
  std::int64_t step = -1;
  std::string message;
  bool operator==(const JobFailure& o) const {
    return reason == o.reason && stage == o.stage && step == o.step && message == o.message;
  }
  bool operator!=(const JobFailure& o) const { return !(*this == o); }
};

struct RegistryStats {
  std::int64_t rebalance_moves = 0;
  std::map<std::string, std::int64_t> events;
  std::optional<JobFailure> failure;  // absent while the job is healthy
};

struct JobProgress {
  std::int64_t step = 0;
  double samples_per_second = 0;  // achieved, from the step advance (see above)
  double loss = 0;                // mean over live trainers; 0 = none reported
  std::vector<StageProgress> stages;
  RegistryStats stats;
  double step_changed_at = 0;     // `now` of the reading where step last rose (0: never seen)
  // (now, step) of recent readings, oldest first; spans at most window_seconds.
  std::deque<std::pair<double, std::int64_t>> window;
};

// Decodes GET /v1/stats. Throws std::invalid_argument naming the field on a malformed reply.
RegistryStats parse_registry_stats(const nlohmann::json& j);

// Folds one reading of the registry into the previous progress of the same job. `workers` are
// the live peers the registry listed (workers and trainers; other roles are ignored); workers on
// a stage outside [0, stages) are ignored, and so are workers in state "failed" (they serve nothing).
JobProgress merge_progress(const JobProgress& previous, const std::vector<planner::PeerRecord>& workers,
                           const RegistryStats& stats, int stages, std::int64_t global_batch, double now,
                           double window_seconds);

// Writes progress into status: step, samplesPerSecond, per-stage step/samples/s/queue/peers,
// rebalanceMoves, swarmEvents. `step_changed_at` is given as RFC 3339 (lastStepTime) by the
// caller. Stages are matched by index; status.stages must already hold one entry per stage.
void apply_progress(SwarmJobStatus& status, const JobProgress& progress, const std::string& last_step_time);

// The registry's failure in status: condition Failed=True with the failure's reason and a message
// naming stage and step, and phase Failed; with no failure in a good reading, Failed=False. Returns
// true when the job turned Failed by this reading (the caller records an Event and counts it).
bool apply_failure(SwarmJobStatus& status, const std::optional<JobFailure>& failure, std::int64_t generation,
                   const std::string& now);
std::string describe(const JobFailure& f);

// The latest reading of a job's registry (progress_poller.h keeps one per job).
struct ProgressReading {
  bool ok = false;
  std::string error;        // when !ok: what failed, with the URL
  std::string error_reason; // RegistryUnreachable | RegistryBadReply | RegistryUnauthorized (401: the
                            // registry refused our signature) | RegistrySecretUnreadable
  std::string url;
  JobProgress progress;     // the last good progress (kept through errors)
  bool has_progress = false;
  double step_changed_unix = 0;  // system-clock seconds of progress.step_changed_at
  double read_unix = 0;          // system-clock seconds of the last good reading (0: none yet)
};

// Registry base URL of a job: the annotation swarm-operator.io/registry-url when set, else
// `url_template` with {job} and {namespace} replaced (default: the job's registry Service).
inline constexpr const char* kAnnotationRegistryUrl = "swarm-operator.io/registry-url";
inline constexpr const char* kDefaultRegistryUrlTemplate = "http://{job}-registry.{namespace}.svc:7400";
std::string registry_url_for(const nlohmann::json& job_obj, const std::string& url_template);

}  // namespace swarm::op
