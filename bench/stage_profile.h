// Per-op profile of a piece of libtorch work (stage_bench --profile): libtorch's profiler
// (autograd::profiler, the Kineto-based one Python's torch.profiler uses) around `iters` calls,
// aggregated by operator name into self time (an op's time minus the ops it called) and calls,
// both per call of the work.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace swarm::bench {

struct OpProfileRow {
  std::string name;
  double self_ms = 0;   // per iteration
  double total_ms = 0;  // per iteration, including the ops it called
  double calls = 0;     // per iteration
};

// Runs fn `iters` times under the profiler (after one unprofiled warm-up call); rows sorted by
// self time, largest first. wall_ms: the profiled iterations' wall time per iteration.
std::vector<OpProfileRow> profile_ops(const std::function<void()>& fn, int64_t iters, double* wall_ms);

// The table: the top `rows` ops and the rest summed, with each op's share of the summed self time.
void print_op_profile(const std::vector<OpProfileRow>& profile, double wall_ms, size_t rows);

}  // namespace swarm::bench
