#include "bench/stage_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

namespace swarm::bench {
namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

struct Span {
  std::string name;
  uint64_t thread = 0;
  double start_us = 0, dur_us = 0, children_us = 0;
};

Span span_of(const prof::KinetoEvent& e) {
  Span s;
  s.name = e.name();
  s.thread = e.startThreadId();
#if TORCH_VERSION_MAJOR >= 2
  s.start_us = static_cast<double>(e.startNs()) / 1e3;
  s.dur_us = static_cast<double>(e.durationNs()) / 1e3;
#else
  s.start_us = static_cast<double>(e.startUs());
  s.dur_us = static_cast<double>(e.durationUs());
#endif
  return s;
}

}  // namespace

std::vector<OpProfileRow> profile_ops(const std::function<void()>& fn, int64_t iters, double* wall_ms) {
  fn();
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  const std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) fn();
  const auto t1 = std::chrono::steady_clock::now();
  auto result = prof::disableProfiler();
  if (wall_ms) *wall_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / iters;

  // Self time: per thread, spans sorted by start (longer first on ties) nest as a stack; each
  // span's time is subtracted from its innermost enclosing span's.
  std::vector<Span> spans;
  for (const auto& e : result->events()) spans.push_back(span_of(e));
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_us != b.start_us) return a.start_us < b.start_us;
    return a.dur_us > b.dur_us;
  });
  std::vector<size_t> stack;
  for (size_t i = 0; i < spans.size(); ++i) {
    while (!stack.empty() && (spans[stack.back()].thread != spans[i].thread ||
                              spans[stack.back()].start_us + spans[stack.back()].dur_us <= spans[i].start_us)) {
      stack.pop_back();
    }
    if (!stack.empty()) spans[stack.back()].children_us += spans[i].dur_us;
    stack.push_back(i);
  }
  std::map<std::string, OpProfileRow> by_name;
  for (const auto& s : spans) {
    auto& row = by_name[s.name];
    row.name = s.name;
    row.self_ms += std::max(0.0, s.dur_us - s.children_us) / 1e3 / iters;
    row.total_ms += s.dur_us / 1e3 / iters;
    row.calls += 1.0 / iters;
  }
  std::vector<OpProfileRow> rows;
  for (auto& [name, row] : by_name) rows.push_back(row);
  std::sort(rows.begin(), rows.end(),
            [](const OpProfileRow& a, const OpProfileRow& b) { return a.self_ms > b.self_ms; });
  return rows;
}

void print_op_profile(const std::vector<OpProfileRow>& profile, double wall_ms, size_t rows) {
  double self_sum = 0;
  for (const auto& r : profile) self_sum += r.self_ms;
  std::printf("per-op profile (libtorch %s profiler), per iteration: wall %.2f ms, ops' self time %.2f ms\n",
              TORCH_VERSION, wall_ms, self_sum);
  std::printf("  %-52s %9s %9s %7s %7s\n", "op", "self ms", "total ms", "calls", "self %");
  double rest = 0, rest_calls = 0;
  for (size_t i = 0; i < profile.size(); ++i) {
    const auto& r = profile[i];
    if (i >= rows) {
      rest += r.self_ms;
      rest_calls += r.calls;
      continue;
    }
    std::printf("  %-52.52s %9.3f %9.3f %7.1f %6.1f%%\n", r.name.c_str(), r.self_ms, r.total_ms, r.calls,
                self_sum > 0 ? 100.0 * r.self_ms / self_sum : 0.0);
  }
  if (profile.size() > rows) {
    std::printf("  %-52s %9.3f %9s %7.1f %6.1f%%\n", "(all other ops)", rest, "", rest_calls,
                self_sum > 0 ? 100.0 * rest / self_sum : 0.0);
  }
}

}  // namespace swarm::bench
