#include "worker/local/report.h"

#include "worker/local/launcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace swarm::runtime {

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(f, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "    " + all[i] + "\n";
  return out;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  auto j = nlohmann::json::parse(f, nullptr, false);
  return j.is_discarded() ? nullptr : j;
}

nlohmann::json sum_worker_events(const std::vector<nlohmann::json>& worker_reports) {
  nlohmann::json out{{"events", nlohmann::json::object()}, {"events_unacknowledged", nlohmann::json::object()}};
  for (const auto& r : worker_reports) {
    if (!r.is_object()) continue;
    for (const char* part : {"events", "events_unacknowledged"}) {
      if (!r.contains(part) || !r[part].is_object()) continue;
      for (const auto& [kind, n] : r[part].items())
        if (n.is_number_integer()) out[part][kind] = out[part].value(kind, int64_t{0}) + n.get<int64_t>();
    }
  }
  return out;
}

// Sums or averages the trainers' reports into one.
nlohmann::json merge_reports(const std::vector<nlohmann::json>& reports) {
  nlohmann::json m = {{"steps", 0}, {"samples", 0}, {"samples_per_second", 0.0}, {"loss_first", 0.0},
                      {"loss_last", 0.0}, {"eval_loss", 0.0}, {"requests_retried", 0},
                      {"microbatches_lost", 0}, {"samples_recomputed", 0}, {"train_seconds", 0.0},
                      {"wire_bytes", 0}, {"wire_bytes_per_sample", 0.0}, {"microbatch_hops", 0},
                      {"cross_region_hops", 0}, {"cross_region_share", 0.0},
                      {"peers_per_stage", nlohmann::json::array()}, {"finished", true}};
  int n = 0;
  for (const auto& r : reports) {
    if (!r.is_object()) continue;
    ++n;
    m["steps"] = std::max(m["steps"].get<int64_t>(), r.value("steps", int64_t{0}));
    for (const char* k : {"samples", "requests_retried", "microbatches_lost", "samples_recomputed", "wire_bytes",
                          "microbatch_hops", "cross_region_hops"})
      m[k] = m[k].get<int64_t>() + r.value(k, int64_t{0});
    m["samples_per_second"] = m["samples_per_second"].get<double>() + r.value("samples_per_second", 0.0);
    for (const char* k : {"loss_first", "loss_last", "eval_loss"}) m[k] = m[k].get<double>() + r.value(k, 0.0);
    m["train_seconds"] = std::max(m["train_seconds"].get<double>(), r.value("train_seconds", 0.0));
    m["data_wait_seconds"] = m.value("data_wait_seconds", 0.0) + r.value("data_wait_seconds", 0.0);
    if (r.contains("peers_per_stage")) m["peers_per_stage"] = r["peers_per_stage"];
    for (const char* k : {"stage_compute_seconds", "stage_wait_seconds"}) {  // summed over trainers
      if (!r.contains(k) || !r[k].is_array()) continue;
      if (!m.contains(k)) m[k] = nlohmann::json::array();
      for (size_t s = 0; s < r[k].size(); ++s) {
        if (m[k].size() <= s) m[k].push_back(0.0);
        m[k][s] = m[k][s].get<double>() + r[k][s].get<double>();
      }
    }
    if (r.contains("loss_curve") && !m.contains("loss_curve")) m["loss_curve"] = r["loss_curve"];
    if (r.contains("progress") && !m.contains("progress")) m["progress"] = r["progress"];
    m["finished"] = m["finished"].get<bool>() && r.value("finished", false);
  }
  if (n > 0)
    for (const char* k : {"loss_first", "loss_last", "eval_loss"}) m[k] = m[k].get<double>() / n;
  if (n == 0) m["finished"] = false;
  if (m["microbatch_hops"].get<int64_t>() > 0)
    m["cross_region_share"] = m["cross_region_hops"].get<double>() / m["microbatch_hops"].get<double>();
  if (m["samples"].get<int64_t>() > 0)
    m["wire_bytes_per_sample"] = m["wire_bytes"].get<double>() / m["samples"].get<double>();
  return m;
}

void show(const nlohmann::json& r, int64_t max_steps, bool tty, bool final_line) {
  std::ostringstream line;
  line << "step " << r.value("steps", int64_t{0}) << "/" << max_steps << "  loss "
       << fmt::format("{:.4f}", r.value("loss_last", 0.0)) << "  samples/s "
       << fmt::format("{:.1f}", r.value("samples_per_second", 0.0)) << "  samples "
       << r.value("samples", int64_t{0}) << "  peers/stage " << r.value("peers_per_stage", nlohmann::json::array()).dump()
       << "  retried " << r.value("requests_retried", int64_t{0});
  if (tty) {
    std::printf("\r\033[K%s%s", line.str().c_str(), final_line ? "\n" : "");
  } else {
    std::printf("%s\n", line.str().c_str());
  }
  std::fflush(stdout);
}

nlohmann::json make_summary(const nlohmann::json& report, const std::string& mode, double wall_seconds) {
  nlohmann::json s = report;
  s["mode"] = mode;
  s["wall_seconds"] = wall_seconds;
  return s;
}

void write_summary(const std::string& path, const nlohmann::json& summary) {
  if (path.empty()) return;
  std::ofstream f(path, std::ios::trunc);
  f << summary.dump(2) << "\n";
  if (!f) throw std::runtime_error("cannot write summary " + path);
}

}  // namespace swarm::runtime
