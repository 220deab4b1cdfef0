#include "operator/controller/progress.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace swarm::op {
namespace {

using nlohmann::json;

// Status figures are rounded so that jitter in the last digits does not cost a status write.
double rounded(double v) { return std::round(v * 100.0) / 100.0; }

std::int64_t count_field(const json& v, const std::string& field) {
  if (!v.is_number_integer() && !v.is_number_unsigned())
    throw std::invalid_argument(field + ": must be an integer, got " + v.dump());
  const std::int64_t n = v.get<std::int64_t>();
  if (n < 0) throw std::invalid_argument(field + ": must be >= 0, got " + v.dump());
  return n;
}

}  // namespace

RegistryStats parse_registry_stats(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("stats: must be a JSON object, got " + j.dump());
  RegistryStats s;
  if (j.contains("rebalanceMoves")) s.rebalance_moves = count_field(j.at("rebalanceMoves"), "rebalanceMoves");
  if (j.contains("events")) {
    const json& ev = j.at("events");
    if (!ev.is_object()) throw std::invalid_argument("events: must be an object, got " + ev.dump());
    for (const auto& [kind, count] : ev.items()) s.events[kind] = count_field(count, "events." + kind);
  }
  if (j.contains("failure") && !j.at("failure").is_null()) {
    const json& f = j.at("failure");
    if (!f.is_object()) throw std::invalid_argument("failure: must be an object, got " + f.dump());
    JobFailure failure;
    if (!f.contains("reason") || !f.at("reason").is_string() || f.at("reason").get<std::string>().empty())
      throw std::invalid_argument("failure.reason: must be a non-empty string, got " + f.value("reason", json()).dump());
    failure.reason = f.at("reason").get<std::string>();
    if (f.contains("stage")) failure.stage = static_cast<int>(count_field(f.at("stage"), "failure.stage"));
    if (f.contains("step")) failure.step = count_field(f.at("step"), "failure.step");
    if (f.contains("message")) {
      if (!f.at("message").is_string()) throw std::invalid_argument("failure.message: must be a string, got " + f.at("message").dump());
      failure.message = f.at("message").get<std::string>();
    }
    s.failure = failure;
  }
  return s;
}

std::string describe(const JobFailure& f) {
  std::string out = f.reason;
  if (f.stage >= 0) out += " in stage " + std::to_string(f.stage);
  if (f.step >= 0) out += " at step " + std::to_string(f.step);
  if (!f.message.empty()) out += ": " + f.message;
  return out + " (reported by the job's registry)";
}

bool apply_failure(SwarmJobStatus& status, const std::optional<JobFailure>& failure, std::int64_t generation,
                   const std::string& now) {
  const Condition* before = find_condition(status.conditions, "Failed");
  const bool was = before && before->status == "True";
  if (!failure) {
    if (before) set_condition(status.conditions, {"Failed", "False", "AsExpected", "the registry reports no failure", "", generation}, now);
    return false;
  }
  set_condition(status.conditions, {"Failed", "True", failure->reason, describe(*failure), "", generation}, now);
  status.phase = "Failed";
  return !was;
}

JobProgress merge_progress(const JobProgress& previous, const std::vector<planner::PeerRecord>& workers,
                           const RegistryStats& stats, int stages, std::int64_t global_batch, double now,
                           double window_seconds) {
  JobProgress p;
  p.stats = stats;
  p.stages.resize(static_cast<size_t>(std::max(stages, 0)));
  for (int s = 0; s < stages; ++s) p.stages[s].stage = s;
  double loss_sum = 0;
  int losses = 0;
  for (const auto& w : workers) {
    if (w.role == "trainer" && std::isfinite(w.loss) && w.loss > 0) {
      loss_sum += w.loss;
      ++losses;
    }
    if (w.role != "worker" || w.stage < 0 || w.stage >= stages) continue;
    // A failed worker (its stage came back without its state) serves nothing: not a live peer.
    if (w.state == planner::PeerState::Failed) continue;
    auto& st = p.stages[w.stage];
    ++st.live_workers;
    st.step = std::max(st.step, w.step);
    if (w.state != planner::PeerState::Joining) {
      st.samples_per_second += w.samples_per_second;
      st.queue_length += w.queue_length;
    }
  }
  for (auto& st : p.stages) st.samples_per_second = rounded(st.samples_per_second);
  p.loss = losses > 0 ? std::round(loss_sum / losses * 1e4) / 1e4 : previous.loss;
  // A stage with no live worker says nothing about the swarm's step: keep the last one known
  // rather than dropping to 0 while a replacement joins.
  std::int64_t step = -1;
  for (const auto& st : p.stages)
    if (st.live_workers > 0) step = step < 0 ? st.step : std::min(step, st.step);
  p.step = step < 0 ? previous.step : step;

  p.step_changed_at = p.step > previous.step || previous.step_changed_at == 0 ? now : previous.step_changed_at;
  p.window = previous.window;
  // A step going back (registry restarted, state restored from an older checkpoint) starts the
  // window afresh: the advance over it would be meaningless. A reading without any live worker
  // says nothing about the step and is not a point of the window.
  if (!p.window.empty() && p.step < p.window.back().second) p.window.clear();
  if (step >= 0) p.window.emplace_back(now, p.step);
  while (p.window.size() > 2 && now - p.window[1].first >= window_seconds) p.window.pop_front();
  p.samples_per_second = 0;
  // No live worker at all: nothing is being trained now, whatever the window says.
  if (step >= 0 && !p.window.empty() && p.window.back().first > p.window.front().first) {
    const auto& [t0, s0] = p.window.front();
    const auto& [t1, s1] = p.window.back();
    p.samples_per_second = rounded(static_cast<double>(s1 - s0) * static_cast<double>(global_batch) / (t1 - t0));
  }
  return p;
}

void apply_progress(SwarmJobStatus& status, const JobProgress& progress, const std::string& last_step_time) {
  status.step = progress.step;
  status.samples_per_second = progress.samples_per_second;
  if (progress.loss > 0) status.loss = progress.loss;
  for (const auto& sp : progress.stages) {
    if (sp.stage < 0 || static_cast<size_t>(sp.stage) >= status.stages.size()) continue;
    auto& st = status.stages[sp.stage];
    st.step = sp.step;
    st.samples_per_second = sp.samples_per_second;
    st.queue_length = sp.queue_length;
    st.peers = sp.live_workers;
  }
  status.rebalance_moves = progress.stats.rebalance_moves;
  status.swarm_events = progress.stats.events;
  if (!last_step_time.empty()) status.last_step_time = last_step_time;
}

std::string registry_url_for(const nlohmann::json& job_obj, const std::string& url_template) {
  const json md = job_obj.value("metadata", json::object());
  const json ann = md.value("annotations", json::object());
  auto it = ann.find(kAnnotationRegistryUrl);
  if (it != ann.end() && it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  std::string url = url_template;
  auto replace_all = [&url](const std::string& from, const std::string& to) {
    for (size_t pos = url.find(from); pos != std::string::npos; pos = url.find(from, pos + to.size()))
      url.replace(pos, from.size(), to);
  };
  replace_all("{job}", md.value("name", ""));
  replace_all("{namespace}", md.value("namespace", "default"));
  return url;
}

}  // namespace swarm::op
