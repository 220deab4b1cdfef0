// `swarm local JOB.yaml`: the whole swarm on one machine. Starts the registry, the workers of every
// stage and the trainers as separate processes on loopback, shows live progress, stops them all
// at the end (or on Ctrl-C), and writes the run's summary.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace swarm::runtime {

struct LocalOptions {
  std::string job_path;
  std::string self_exe;          // this program, started again for every child process
  int64_t steps = 0;             // 0 = spec.training.maxSteps
  double max_seconds = 0;        // 0 = no limit
  std::string summary_path;      // "" = none
  std::string baseline;          // "", "single-process" or "gpipe"
  std::string log_dir;           // "" = a fresh temporary folder
  int threads_per_worker = 0;    // 0 = spec.workers.threads, or cores / workers when that is 0
  bool progress = true;          // live progress line on stdout
  std::string log_level = "info";
  // Preemption injection (see preemption.h); 0 = off. The seed defaults to spec.training.seed.
  double preempt_every = 0;
  double preempt_notice = 0;
  double respawn_after = 0;
  int64_t seed = -1;
  std::vector<int> workers_per_stage;              // overrides spec.workers.perStage per stage
  // --regions a,b: each worker, trainer and joiner runs with --region, as regions.h assigns them;
  // the summary counts the hops the trainers routed across regions. Empty = no regions.
  std::vector<std::string> regions;
  std::map<std::string, double> slow_workers;      // worker name -> slowdown factor
  // Checkpoints when the spec has no location: by default (no_checkpoints false) the run keeps them
  // under <log dir>/checkpoints whenever a stage has a single peer or preemptions are on, every
  // step with preemptions, else every 10 steps (at most spec.checkpoint.everySteps apart);
  // checkpoint_every > 0 overrides the interval (and asks for checkpoints in any case).
  bool no_checkpoints = false;
  int64_t checkpoint_every = 0;
  // Emulated networks (bench/net/regions.sh): every child process is started as
  // `child_wrapper ROLE ID EXE ARGS...` (ROLE registry|worker|trainer, ID its name), which must exec
  // EXE with ARGS, e.g. inside a network namespace. The registry binds `registry_host`, and every
  // peer reaches it there.
  std::string child_wrapper;     // "" = start children directly
  std::string registry_host = "127.0.0.1";
};

// Exit status of run_local when the job failed (a stage came back without its state after the
// job trained: the summary's "failure" says which and at which step).
inline constexpr int kJobFailedExit = 3;

// Returns the process exit status: 0 when training ran to its end, kJobFailedExit when the job
// failed (see above), other non-zero values on other failures, 130 when interrupted.
// `stop` turns true on Ctrl-C / SIGTERM; every child is then stopped, none is left behind.
int run_local(const LocalOptions& options, const std::atomic<bool>& stop);

// The summary fields shared by the swarm run and the single-process baseline.
nlohmann::json make_summary(const nlohmann::json& report, const std::string& mode, double wall_seconds);

}  // namespace swarm::runtime
