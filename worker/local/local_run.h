// The `swarm local` run's parts (internal to worker/local): its child processes (`Child`) and
// `LocalRun`, whose methods live in three files: launcher.cc (planning and starting the processes,
// run_local), supervision.cc (the loop that watches them: exits, the registry, preemptions, the
// stage census) and run_end.cc (stopping them and the summary).
#pragma once

#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/subprocess.h"
#include "registry/registry_client.h"
#include "worker/local/launcher.h"
#include "worker/local/preemption.h"
#include "worker/local/regions.h"

namespace swarm::runtime::local_run {

using subprocess::describe_exit;
using subprocess::Subprocess;

// One process of the run. `proc` owns it: a Child dropped while its process runs kills it.
struct Child {
  std::string name;   // "registry", "worker stage0-w1", "trainer trainer0"
  std::string role;
  std::string id;     // "registry", "stage0-w1", "trainer0"
  int stage = -1;
  std::string log;    // relative to the log folder until started
  Subprocess proc;
  bool withdrawn = false;  // removed from discovery after it exited (the registry answered)
  double withdraw_retry_at = 0;  // a withdraw the registry did not answer is tried again from then
  bool replaced = false;   // a registry that exited and was started again
  std::string region;      // --region of a worker ("" = none)
  bool preempted = false;  // signalled by the preemption schedule (its region was queued for a joiner)
  bool exited() const { return !proc.running(); }
};

// A registry that keeps exiting is not coming back: the run stops after this many restarts.
constexpr int kMaxRegistryRestarts = 5;

// Polls every child: one that exited is reaped.
void reap(std::vector<Child>& children);

// How long a worker that has drained may take to write its last checkpoint and its report.
constexpr double kLastCheckpointSeconds = 60;

// SIGTERM to every running child of `role` ("" = all), SIGKILL to those left after grace_seconds.
void stop_children(std::vector<Child>& children, const std::string& role, double grace_seconds);

// One `swarm local` run of the swarm: its child processes, the supervision loop's state and the
// accounting that ends up in the summary. run() is the whole run; it returns the exit status.
// Every child is stopped (and reaped) before run() returns; one still running when the object is
// destroyed (an exception) is killed by its Subprocess.
class LocalRun {
 public:
  LocalRun(const LocalOptions& o, const JobSpec& spec, const std::atomic<bool>& stop, int64_t max_steps,
           double started)
      : o_(o), spec_(spec), stop_(stop), max_steps_(max_steps), started_(started),
        tty_(o.progress && ::isatty(1)) {}

  int run();

 private:
  // A stage with no serving peer for this long fails the run when no joiner can fill it.
  static constexpr double kStageLostSeconds = 20;

  void ensure_secret();
  void plan_processes();
  void plan_checkpoints();
  void start(Child c, const std::vector<std::string>& args);
  int fail(const std::string& why);
  void start_registry();
  bool registry_up();
  bool restart_registry(const std::string& how);
  std::optional<std::string> restart_exited_registry();
  std::optional<std::string> check_workers_per_stage() const;
  void start_worker(const std::string& id, int s, const std::string& region);
  void start_workers();
  void start_trainers();
  // Waits until every worker started has announced itself to the registry (in any state), at
  // most kWorkersAnnounceSeconds, or until one of them exits (supervise reports it).
  void await_workers_announced();
  void write_processes() const;
  void print_banner() const;
  nlohmann::json merged() const;
  std::optional<int> supervise();
  bool trainers_running() const;
  void withdraw_dead_workers();
  void preempt();
  void census();
  std::optional<std::string> lost_stage() const;
  bool job_failed();
  int finish();
  nlohmann::json settled_stats(const nlohmann::json& fallback);
  nlohmann::json summary_of(const nlohmann::json& report, nlohmann::json stats);
  int exit_status(const nlohmann::json& report) const;

  const LocalOptions& o_;
  const JobSpec& spec_;
  const std::atomic<bool>& stop_;
  const int64_t max_steps_;
  const double started_;
  const bool tty_;
  // Planned before anything starts.
  std::string dir_;
  int total_workers_ = 0;
  int threads_ = 1;
  int registry_port_ = 0;
  std::string registry_url_;
  std::string checkpoint_dir_;
  int64_t checkpoint_every_ = 0;
  double drain_seconds_ = 10;
  PreemptionOptions popt_;
  // The processes and what they write.
  std::vector<Child> children_;
  std::unique_ptr<registry::RegistryClient> registry_;
  std::vector<std::string> reports_;
  std::vector<std::string> worker_reports_;  // written by each worker as it stops
  int joiners_ = 0;
  JoinerRegions joiner_regions_{o_.regions};  // preempted workers' regions, each for the next joiner
  int registry_restarts_ = 0;
  int64_t preemptions_reported_ = 0;  // what the registry has counted of preemptions_ so far
  double preemptions_retry_at_ = 0;
  // The supervision loop's state.
  std::unique_ptr<PreemptionSchedule> preemptions_;
  double last_show_ = 0, last_census_ = 0, last_failure_check_ = 0;
  bool interrupted_ = false;
  bool swarm_up_ = false;
  std::vector<double> stage_empty_, empty_since_;
  std::vector<int> final_peers_;
  double serving_worker_seconds_ = 0, census_seconds_ = 0;  // capacity actually alive
  nlohmann::json failure_;  // the registry's "failure" once a worker reported one
  nlohmann::json events_seen_ = nlohmann::json::object();  // the registry's events, last read
};

}  // namespace swarm::runtime::local_run
