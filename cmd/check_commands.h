// swarm step-check: the step invariant of a live job (worker/local/step_invariant.h), from the
// registry's GET /v1/stats and each trainer's GET /metrics, saved to files. Prints the invariant as
// JSON; exits 0 when it holds, 3 when a stage's steps do not match the trainers' completed global
// batches beyond what is accounted (with --allow-short: only when a stage admitted more than is
// accounted; a stage short of the count is printed, short_samples). The cluster end-to-end test runs it after its faults.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace swarm::cli {

struct StepCheckCommand {
  CLI::App* cmd = nullptr;
  std::string job, stats;
  std::vector<std::string> before, after;
  int64_t registry_restarts = 0;
  bool allow_short = false;
  void add_to(CLI::App& app);
  int run() const;
};

}  // namespace swarm::cli
