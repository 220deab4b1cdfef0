// The step invariant of a run (issue 29): one global batch is one step for every stage. Pure:
// computed from the registry's stats and the trainers' merged report, which the summary of
// `swarm local` carries and bench/soak.sh prints.
//
// Every step of a stage holds exactly the global batch T of claims (planner/step_book.h,
// Claims): one per sample the stage admitted. So for each stage s, with N its step number (its
// open step), O the claims of that open step and C the samples of every microbatch the trainers
// completed,
//   extra = T * N + O - C
// counts the samples the stage admitted beyond one admission per completed microbatch. It is 0
// in a run without faults (every stage's step is then C / T, rounded down), and a fault can only
// add what is counted (accounted_samples):
//   samples_readmitted       retries of a gone peer's work that took a fresh claim (registry)
//   samples_unretried        a gone peer's owed work whose retries came after its step closed:
//                            claimed there, and again in the later step they land in (registry)
//   microbatches_lost * B    microbatches the trainers gave up after a stage admitted them
//   stale_handoff_samples    a leaving peer's gradient taken into a later step (claimed twice)
//   step_numbers_skipped * T a stage restored from an older checkpoint, or a peer with nobody
//                            ahead, takes up the swarm's step number (checkpoint_steps_lost +
//                            stage_steps_lost; each skipped number holds no claim)
//   in_flight_samples        read while the job trains (`swarm step-check` on a live job): the
//                            microbatches the trainers still had in flight, admitted by some
//                            stages but not yet completed (0 at the end of a run)
// and take away at most handoff_samples_unconfirmed (a hand-off that may never have been taken
// gives its claim back) plus T per registry restart (a restarted registry lost the claims of the
// peers that died before it). ok: every stage's extra lies within those bounds. Anything else is a
// stage that closed a step it did not fill (extra too high), or one that admitted more than its
// global batch (extra negative).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace swarm::runtime {

struct StepInvariantInput {
  nlohmann::json stats;   // the registry's GET /v1/stats: stageSteps, stageOpenSamples, events
  nlohmann::json report;  // the trainers' merged report: samples, microbatches_lost
  int64_t global_batch = 0;
  int64_t microbatch = 0;
  int64_t registry_restarts = 0;
  int64_t in_flight_samples = 0;  // at most this many admitted samples the trainers had not completed yet
};

// {"global_batch", "completed_samples", "completed_global_batches", "accounted_samples": {the
// terms above, "total", "may_take_away"}, "stages": {s: {"step", "open_samples", "extra_samples"}},
// "none_over" (no stage admitted more than is accounted: the upper bound alone), "short_samples"
// (the most a stage is under the trainers' count beyond what may be taken away: steps that closed
// holding fewer claims than the global batch, a shortfall whose cause issue 29 leaves open), "ok"};
// null when the stats lack stageSteps (a registry that never answered).
nlohmann::json step_invariant(const StepInvariantInput& in);

// The stages' steps in the stats and how far apart they are: {"stage_steps", "stage_step_spread"}
// (empty when the stats lack stageSteps).
nlohmann::json stage_step_spread(const nlohmann::json& stats);

// The trainers' side of the invariant from their Prometheus metrics (the text GET /metrics
// returns, one per trainer): {"samples": the sum of swarm_trainer_samples_completed_total,
// "microbatches_lost": of swarm_trainer_microbatches_lost_total}. Throws std::invalid_argument
// naming the metric when a text lacks one (not a trainer's metrics).
nlohmann::json trainer_counts(const std::vector<std::string>& expositions);

}  // namespace swarm::runtime
