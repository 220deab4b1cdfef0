#include "worker/local/step_invariant.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
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

nlohmann::json trainer_counts(const std::vector<std::string>& expositions) {
  const char* const names[] = {"swarm_trainer_samples_completed_total", "swarm_trainer_microbatches_lost_total"};
  int64_t sums[2] = {0, 0};
  for (size_t t = 0; t < expositions.size(); ++t) {
    bool seen[2] = {false, false};
    std::istringstream in(expositions[t]);
    for (std::string line; std::getline(in, line);) {
      for (int i = 0; i < 2; ++i) {
        const std::string name = names[i];
        // "name{labels} value" or "name value"; not a longer name that starts with this one
        if (line.compare(0, name.size(), name) != 0 || line.size() == name.size()) continue;
        if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
        const auto sp = line.find_last_of(' ');
        const std::string num = line.substr(sp + 1);
        char* end = nullptr;
        const double v = std::strtod(num.c_str(), &end);
        if (num.empty() || end != num.c_str() + num.size())
          throw std::invalid_argument("trainer metrics " + std::to_string(t + 1) + ": " + name + " has no number: \"" +
                                      line.substr(0, 200) + "\"");
        if (!(v >= 0) || v > 9e18)
          throw std::invalid_argument("trainer metrics " + std::to_string(t + 1) + ": " + name + " is " + line.substr(sp + 1));
        sums[i] += static_cast<int64_t>(v);
        seen[i] = true;
      }
    }
    for (int i = 0; i < 2; ++i)
      if (!seen[i])
        throw std::invalid_argument("trainer metrics " + std::to_string(t + 1) + ": no " + names[i] +
                                    " (not a trainer's GET /metrics?)");
  }
  return {{"samples", sums[0]}, {"microbatches_lost", sums[1]}};
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
                      (int_at(events, "checkpoint_steps_lost") + int_at(events, "stage_steps_lost")) * T},
                     {"in_flight_samples", std::max<int64_t>(0, in.in_flight_samples)}};
  int64_t total = 0;
  for (const auto& [k, v] : acc.items()) total += v.get<int64_t>();
  const int64_t take_away = int_at(events, "handoff_samples_unconfirmed") + in.registry_restarts * T;
  acc["total"] = total;
  acc["may_take_away"] = take_away;
  nlohmann::json stages = nlohmann::json::object();
  bool ok = true, none_over = true;
  int64_t short_most = 0;
  for (const auto& [s, n] : st["stageSteps"].items()) {
    if (!n.is_number_integer()) continue;
    const int64_t o = int_at(open, s), extra = T * n.get<int64_t>() + o - C;
    stages[s] = {{"step", n}, {"open_samples", o}, {"extra_samples", extra}};
    ok = ok && extra >= -take_away && extra <= total;
    none_over = none_over && extra <= total;
    short_most = std::max(short_most, -take_away - extra);
  }
  return {{"global_batch", T},
          {"completed_samples", C},
          {"completed_global_batches", T > 0 ? C / T : 0},
          {"accounted_samples", acc},
          {"stages", stages},
          {"none_over", none_over},
          {"short_samples", short_most},
          {"ok", ok}};
}

}  // namespace swarm::runtime
