// The preemption schedule of `swarm local --preempt-every`: which worker to take down when, and
// when its replacement starts. Pure (time passed in) and seeded, so `--seed` repeats a run's
// schedule exactly.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace swarm::runtime {

struct PreemptionOptions {
  double every_seconds = 0;    // 0 = no preemptions
  double notice_seconds = 0;   // 0 = SIGKILL at once; else SIGTERM, then SIGKILL after this long
  double respawn_seconds = 0;  // 0 = no replacement; else a joiner starts this long after
  uint64_t seed = 1;
};

struct PreemptionAction {
  enum Kind { Terminate /*SIGTERM: notice*/, Kill /*SIGKILL*/, Respawn } kind;
  std::string victim;  // worker name for Terminate/Kill; empty for Respawn
};

class PreemptionSchedule {
 public:
  PreemptionSchedule(PreemptionOptions options, double start);

  // Actions due at `now`, given the workers alive now (names). Call it often; each action is
  // returned once. A victim is drawn uniformly from `alive` with the seeded generator.
  std::vector<PreemptionAction> due(double now, const std::vector<std::string>& alive);

  int64_t preemptions() const { return preemptions_; }
  bool enabled() const { return options_.every_seconds > 0; }

 private:
  struct Pending {
    double at;
    PreemptionAction action;
  };
  PreemptionOptions options_;
  std::mt19937_64 rng_;
  double next_;
  std::vector<Pending> pending_;
  int64_t preemptions_ = 0;
};

}  // namespace swarm::runtime
