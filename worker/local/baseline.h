// `--baseline single-process`: the same model (same stages, same initial parameters), the same
// data stream and the same optimizer, trained in one process without any network. The reference
// for pipeline overhead and learning parity; it reports the same fields as a trainer.
#pragma once

#include <atomic>

#include "common/job_spec.h"
#include "worker/trainer/trainer.h"

namespace swarm::runtime {

struct BaselineOptions {
  int64_t max_steps = 0;    // 0 = spec.training.maxSteps
  double max_seconds = 0;   // 0 = no limit
  int threads = 0;          // torch intra-op threads; 0 = all cores
  int eval_batches = -1;    // -1 = spec.training.evalBatches
  std::function<void(const TrainerReport&)> on_progress;  // called about once a second
};

TrainerReport run_single_process(const JobSpec& spec, const BaselineOptions& options,
                                 const std::atomic<bool>& stop);

struct LocalOptions;

// `swarm local --baseline single-process`: run_single_process with the progress line and the
// summary of `swarm local` (mode "single-process"); returns the exit status (130 when stopped).
int run_local_baseline(const LocalOptions& options, const JobSpec& spec, int64_t max_steps, double started,
                       const std::atomic<bool>& stop);

}  // namespace swarm::runtime
