#include "worker/local/step_invariant.h"

#include <algorithm>
#include <limits>
#include <string>

namespace swarm::runtime {
namespace {

int64_t int_at(const nlohmann::json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return 0;
  return obj[key].get<int64_t>();
}

}  // namespace

nlohmann::json stage_step_spread(const nlohmann::json& stats) {
  nlohmann::json out = nlohmann::json::object();
  if (!stats.is_object() || !stats.contains("stageSteps") || !stats["stageSteps"].is_object()) return out;
  out["stage_steps"] = stats["stageSteps"];
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& [k, v] : stats["stageSteps"].items()) {
    if (!v.is_number_integer()) continue;
    lo = std::min(lo, v.get<int64_t>());
    hi = std::max(hi, v.get<int64_t>());
  }
  out["stage_step_spread"] = hi >= lo ? hi - lo : 0;
  return out;
}

nlohmann::json step_invariant(const StepInvariantInput& in) {
  const nlohmann::json& st = in.stats;
  if (!st.is_object() || !st.contains("stageSteps") || !st["stageSteps"].is_object()) return nullptr;
  const nlohmann::json events = st.contains("events") ? st["events"] : nlohmann::json::object();
  const nlohmann::json open = st.contains("stageOpenSamples") ? st["stageOpenSamples"] : nlohmann::json::object();
  const int64_t T = in.global_batch, C = int_at(in.report, "samples");
  nlohmann::json acc{{"samples_readmitted", int_at(events, "samples_readmitted")},
                     {"samples_unretried", int_at(events, "samples_unretried")},
                     {"microbatches_lost", int_at(in.report, "microbatches_lost") * in.microbatch},
                     {"stale_handoff_samples", int_at(events, "stale_handoff_samples")},
                     {"step_numbers_skipped",
                      (int_at(events, "checkpoint_steps_lost") + int_at(events, "stage_steps_lost")) * T}};
  int64_t total = 0;
  for (const auto& [k, v] : acc.items()) total += v.get<int64_t>();
  const int64_t take_away = int_at(events, "handoff_samples_unconfirmed") + in.registry_restarts * T;
  acc["total"] = total;
  acc["may_take_away"] = take_away;
  nlohmann::json stages = nlohmann::json::object();
  bool ok = true;
  for (const auto& [s, n] : st["stageSteps"].items()) {
    if (!n.is_number_integer()) continue;
    const int64_t o = int_at(open, s), extra = T * n.get<int64_t>() + o - C;
    stages[s] = {{"step", n}, {"open_samples", o}, {"extra_samples", extra}};
    ok = ok && extra >= -take_away && extra <= total;
  }
  return {{"global_batch", T},
          {"completed_samples", C},
          {"completed_global_batches", T > 0 ? C / T : 0},
          {"accounted_samples", acc},
          {"stages", stages},
          {"ok", ok}};
}

}  // namespace swarm::runtime
