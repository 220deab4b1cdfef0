#include "cmd/check_commands.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "worker/local/step_invariant.h"

namespace swarm::cli {
namespace {

std::string read_all(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(what + " " + path + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> read_each(const std::vector<std::string>& paths, const std::string& what) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(read_all(p, what));
  return out;
}

}  // namespace

void StepCheckCommand::add_to(CLI::App& app) {
  cmd = app.add_subcommand("step-check",
                           "whether every stage's step is the trainers' completed global batches (a live job)");
  cmd->add_option("--job", job, "the job's spec or SwarmJob manifest (global batch, microbatch, in-flight lanes)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--stats", stats, "the registry's GET /v1/stats, saved to a file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--trainer-metrics", before,
                  "each trainer's GET /metrics, saved before the stats were read (one file per trainer)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--trainer-metrics-after", after,
                  "the same trainers' GET /metrics saved after the stats: what they completed meanwhile is "
                  "allowed as in flight")
      ->check(CLI::ExistingFile);
  cmd->add_option("--registry-restarts", registry_restarts, "times the job's registry restarted")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_flag("--allow-short", allow_short,
                "fail only when a stage admitted more than is accounted (the upper bound); a stage under the "
                "trainers' count (steps closed short of the global batch, issue 29) is printed as short_samples");
}

int StepCheckCommand::run() const {
  const JobSpec spec = load_job_spec(job);
  const nlohmann::json counts = runtime::trainer_counts(read_each(before, "--trainer-metrics"));
  int64_t completed_meanwhile = 0;
  if (!after.empty()) {
    if (after.size() != before.size())
      throw std::invalid_argument("--trainer-metrics-after: " + std::to_string(after.size()) + " files for " +
                                  std::to_string(before.size()) + " --trainer-metrics (one per trainer, in order)");
    completed_meanwhile = runtime::trainer_counts(read_each(after, "--trainer-metrics-after"))["samples"].get<int64_t>() -
                          counts["samples"].get<int64_t>();
    if (completed_meanwhile < 0)
      throw std::invalid_argument("--trainer-metrics-after: fewer completed samples than before (" +
                                  std::to_string(completed_meanwhile) + "): a trainer restarted between the reads");
  }
  nlohmann::json registry_stats;
  try {
    registry_stats = nlohmann::json::parse(read_all(stats, "--stats"));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("--stats " + stats + ": not JSON: " + e.what());
  }
  runtime::StepInvariantInput in;
  in.stats = registry_stats;
  in.report = counts;
  in.global_batch = spec.training.global_batch;
  in.microbatch = spec.training.microbatch;
  in.registry_restarts = registry_restarts;
  // Every lane of every trainer may hold one microbatch some stages admitted and it has not completed.
  in.in_flight_samples = static_cast<int64_t>(before.size()) * spec.trainers.inflight_microbatches *
                             spec.training.microbatch + completed_meanwhile;
  const nlohmann::json r = runtime::step_invariant(in);
  if (r.is_null()) throw std::invalid_argument("--stats " + stats + ": no stageSteps (not the registry's GET /v1/stats?)");
  std::cout << r.dump(2) << "\n";
  return r.value(allow_short ? "none_over" : "ok", false) ? 0 : 3;
}

}  // namespace swarm::cli
