#include "worker/local/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "common/cpu_cores.h"
#include "common/job_spec.h"
#include "common/subprocess.h"
#include "registry/registry_client.h"
#include "worker/local/baseline.h"
#include "worker/runtime/clock.h"
#include "common/ports.h"
#include "common/random_token.h"
#include "worker/checkpoint/export.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/local/regions.h"
#include "worker/local/report.h"
#include "worker/local/preemption.h"
#include "worker/local/step_invariant.h"

namespace fs = std::filesystem;
namespace swarm::runtime {
namespace {

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

void reap(std::vector<Child>& children) {
  for (auto& c : children) c.proc.poll();
}

// How long a worker that has drained may take to write its last checkpoint and its report.
constexpr double kLastCheckpointSeconds = 60;

void stop_children(std::vector<Child>& children, const std::string& role, double grace_seconds) {
  for (auto& c : children)
    if (!c.exited() && (role.empty() || c.role == role)) c.proc.signal(SIGTERM);
  const double until = now_seconds() + grace_seconds;
  while (now_seconds() < until) {
    reap(children);
    bool alive = false;
    for (auto& c : children) alive = alive || (!c.exited() && (role.empty() || c.role == role));
    if (!alive) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& c : children) {
    if (!c.exited() && (role.empty() || c.role == role)) {
      spdlog::warn("{} did not stop within {} s; killing it", c.name, grace_seconds);
      c.proc.kill();
    }
  }
}

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

// The job secret: the spec's environment variable, or the run's own, kept in the log folder
// (job-secret, mode 0600) so that a later run with the same --log-dir can open the checkpoints this
// one wrote (they are authenticated with it: checkpoint.h). Children inherit it.
void LocalRun::ensure_secret() {
  const char* env_secret = std::getenv(spec_.secret.env.c_str());
  if (!env_secret || !*env_secret) ::setenv(spec_.secret.env.c_str(), kept_token(dir_ + "/job-secret").c_str(), 1);
}

// The log folder, the worker count, torch threads per worker and the registry's address.
void LocalRun::plan_processes() {
  dir_ = o_.log_dir.empty() ? (fs::temp_directory_path() / ("swarm-local-" + std::to_string(::getpid()))).string()
                            : o_.log_dir;
  fs::create_directories(dir_);
  ensure_secret();
  const int cores = usable_cores();
  total_workers_ = static_cast<int>(spec_.pipeline.stages * spec_.workers.per_stage);
  if (!o_.workers_per_stage.empty()) {
    total_workers_ = 0;
    for (int n : o_.workers_per_stage) total_workers_ += n;
  }
  threads_ = o_.threads_per_worker > 0 ? o_.threads_per_worker
             : spec_.workers.threads > 0 ? static_cast<int>(spec_.workers.threads)
                                         : std::max(1, cores / total_workers_);
  registry_port_ = pick_free_port(o_.registry_host);
  registry_url_ = "http://" + o_.registry_host + ":" + std::to_string(registry_port_);
  // Its requests are signed with the job secret, like every peer's (ensure_secret ran first).
  registry_ = std::make_unique<registry::RegistryClient>(registry_url_, std::chrono::milliseconds(1000),
                                                         resolve_secret(spec_.secret));
}

// A stage that loses its last peer comes back from its checkpoint, or the job stops (a stage
// must never train on from its initial parameters: issue 11). With no checkpoint location in the
// spec, the run keeps checkpoints next to its logs whenever a stage can lose its last peer: it
// has a single one, or preemptions are on. Preemptions take peers every few seconds, so then
// every step is kept (a few MB per stage; the write is atomic and prunes older ones).
void LocalRun::plan_checkpoints() {
  popt_ = PreemptionOptions{o_.preempt_every, o_.preempt_notice, o_.respawn_after,
                            o_.seed >= 0 ? static_cast<uint64_t>(o_.seed) : spec_.training.seed};
  bool single_peer_stage = false;
  for (int s = 0; s < spec_.pipeline.stages; ++s) {
    const int n = o_.workers_per_stage.empty() ? static_cast<int>(spec_.workers.per_stage)
                  : s < static_cast<int>(o_.workers_per_stage.size()) ? o_.workers_per_stage[s] : 0;
    single_peer_stage = single_peer_stage || n <= 1;
  }
  const bool default_checkpoints = spec_.checkpoint.path.empty() && !o_.no_checkpoints &&
                                   (popt_.every_seconds > 0 || single_peer_stage || o_.checkpoint_every > 0);
  checkpoint_dir_ = default_checkpoints ? dir_ + "/checkpoints" : "";
  checkpoint_every_ =
      o_.checkpoint_every > 0 ? o_.checkpoint_every
      : default_checkpoints ? std::min<int64_t>(spec_.checkpoint.every_steps, popt_.every_seconds > 0 ? 1 : 10)
                            : 0;
  drain_seconds_ = o_.preempt_notice > 0 ? o_.preempt_notice : 10;
}

// Starts this program again as `args` (after --log-level), its output in the log folder.
void LocalRun::start(Child c, const std::vector<std::string>& args) {
  c.log = dir_ + "/" + c.log;
  std::vector<std::string> full = {"--log-level", o_.log_level};
  full.insert(full.end(), args.begin(), args.end());
  subprocess::SpawnOptions so;
  so.log_path = c.log;
  if (!o_.child_wrapper.empty()) full.insert(full.begin(), {c.role, c.id, o_.self_exe});
  c.proc = Subprocess(o_.child_wrapper.empty() ? o_.self_exe : o_.child_wrapper, full, so);
  children_.push_back(std::move(c));
}

int LocalRun::fail(const std::string& why) {
  spdlog::error("{}", why);
  stop_children(children_, "trainer", 5);
  stop_children(children_, "", 5);
  return 1;
}

void LocalRun::start_registry() {
  std::vector<std::string> args = {"registry", "--host", o_.registry_host, "--port", std::to_string(registry_port_),
                                   "--peer-expiry", std::to_string(spec_.timeouts.peer_expiry_seconds), "--job",
                                   o_.job_path};
  if (o_.baseline == "gpipe") args.push_back("--no-rebalancing");  // its pipelines are fixed
  start({"registry", "registry", "registry", -1, "registry.log", {}}, args);
}

// Waits for the newest registry process to answer; false if it exited or did not in time.
bool LocalRun::registry_up() {
  for (double until = now_seconds() + 15; !registry_->healthy();) {
    reap(children_);
    if (children_.back().exited() || now_seconds() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The registry exited: start it again at the same address (peers re-announce their stage,
// step and state on their next heartbeat, and the new one rebuilds its view from them) and
// give it the events counted so far. Events counted after the last read (0.5 s) are lost.
bool LocalRun::restart_registry(const std::string& how) {
  if (++registry_restarts_ > kMaxRegistryRestarts) return false;
  spdlog::warn("the registry exited ({}); starting it again on {}", how, registry_url_);
  start_registry();
  if (!registry_up()) return false;
  for (const auto& [kind, count] : events_seen_.items()) {
    try {
      if (count.is_number_integer() && count.get<int64_t>() > 0) registry_->add_event(kind, count.get<int64_t>());
    } catch (const std::exception&) {
    }
  }
  write_processes();
  std::printf("swarm local: restarted the registry (%s before); peers re-announce to it\n", how.c_str());
  std::fflush(stdout);
  return true;
}

// Restarts a registry process that exited; the reason to fail the run when that did not work.
std::optional<std::string> LocalRun::restart_exited_registry() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].role != "registry" || !children_[i].exited() || children_[i].replaced) continue;
    const int status = children_[i].proc.status();  // `children_` grows: no reference into it
    const std::string log = children_[i].log;
    children_[i].replaced = true;
    if (!restart_registry(describe_exit(status)))
      return "the registry exited (" + describe_exit(status) + ") and could not be started again; its log:\n" +
             tail_of(log, 20);
    break;  // `children_` grew
  }
  return std::nullopt;
}

std::optional<std::string> LocalRun::check_workers_per_stage() const {
  if (!o_.workers_per_stage.empty() && static_cast<int64_t>(o_.workers_per_stage.size()) != spec_.pipeline.stages)
    return "--workers-per-stage: expected " + std::to_string(spec_.pipeline.stages) + " counts, got " +
           std::to_string(o_.workers_per_stage.size());
  return std::nullopt;
}

// A worker `id` of stage `s` (-1: the registry assigns one, as for a joiner) in `region` ("" = none).
void LocalRun::start_worker(const std::string& id, int s, const std::string& region) {
  std::vector<std::string> args = {"worker", "--job", o_.job_path, "--stage", s >= 0 ? std::to_string(s) : "auto",
                                   "--peer-id", id, "--registry", registry_url_, "--threads",
                                   std::to_string(threads_), "--drain-seconds", std::to_string(drain_seconds_)};
  if (!checkpoint_dir_.empty()) args.insert(args.end(), {"--checkpoint-dir", checkpoint_dir_});
  if (checkpoint_every_ > 0) args.insert(args.end(), {"--checkpoint-every", std::to_string(checkpoint_every_)});
  const std::string report = dir_ + "/" + id + ".worker.json";
  if (std::find(worker_reports_.begin(), worker_reports_.end(), report) == worker_reports_.end())
    worker_reports_.push_back(report);
  args.insert(args.end(), {"--report", report, "--steps", std::to_string(max_steps_)});
  if (auto it = o_.slow_workers.find(id); it != o_.slow_workers.end())
    args.insert(args.end(), {"--slowdown", std::to_string(it->second)});
  if (!region.empty()) args.insert(args.end(), {"--region", region});
  Child c{"worker " + id, "worker", id, s, id + ".log", {}};
  c.region = region;
  start(std::move(c), args);
}

void LocalRun::start_workers() {
  for (int s = 0; s < spec_.pipeline.stages; ++s) {
    const int n = o_.workers_per_stage.empty() ? static_cast<int>(spec_.workers.per_stage) : o_.workers_per_stage[s];
    for (int i = 0; i < n; ++i)
      start_worker("stage" + std::to_string(s) + "-w" + std::to_string(i), s, region_of(o_.regions, i));
  }
}

void LocalRun::start_trainers() {
  // GPipe: one trainer per pipeline, pipeline t of worker t of every stage (data parallel).
  const bool gpipe = o_.baseline == "gpipe";
  const int pipelines = gpipe ? o_.workers_per_stage.at(0) : 1;  // run_local sets them, all equal
  for (int t = 0; t < (gpipe ? pipelines : spec_.trainers.count); ++t) {
    const std::string id = "trainer" + std::to_string(t);
    reports_.push_back(dir_ + "/" + id + ".json");
    std::vector<std::string> args = {"trainer", "--job", o_.job_path, "--index", std::to_string(t), "--peer-id", id,
                                     "--registry", registry_url_, "--report", reports_.back(), "--steps",
                                     std::to_string(max_steps_)};
    if (o_.max_seconds > 0) args.insert(args.end(), {"--max-seconds", std::to_string(o_.max_seconds)});
    if (!o_.regions.empty()) args.insert(args.end(), {"--region", region_of(o_.regions, t)});
    if (gpipe) {
      std::string peers;
      for (int st = 0; st < spec_.pipeline.stages; ++st)
        peers += (st ? "," : "") + std::string("stage") + std::to_string(st) + "-w" + std::to_string(t);
      args.insert(args.end(), {"--gpipe", "--gpipe-peers", peers, "--gpipe-pipelines", std::to_string(pipelines)});
    }
    start({"trainer " + id, "trainer", id, -1, id + ".log", {}}, args);
  }
}

// Which process is which, for operators of the run (and tests that kill one on purpose).
void LocalRun::write_processes() const {
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& c : children_) {
    if (c.replaced) continue;
    procs.push_back({{"name", c.name}, {"role", c.role}, {"stage", c.stage}, {"pid", c.proc.pid()}, {"log", c.log}});
    if (c.role == "registry") {
      procs.back()["url"] = registry_url_;
      procs.back()["checkpoints"] = checkpoint_dir_.empty() ? spec_.checkpoint.path : checkpoint_dir_;
    }
  }
  std::ofstream(dir_ + "/processes.json") << procs.dump(2) << "\n";
}

void LocalRun::print_banner() const {
  std::printf("swarm local: %s, %lld stages x %lld workers, %lld trainer(s), %d torch thread(s) per worker; logs in %s\n",
              spec_.name.c_str(), static_cast<long long>(spec_.pipeline.stages),
              static_cast<long long>(spec_.workers.per_stage), static_cast<long long>(spec_.trainers.count), threads_,
              dir_.c_str());
  const std::string checkpoints_at = checkpoint_dir_.empty() ? spec_.checkpoint.path : checkpoint_dir_;
  if (!checkpoints_at.empty())
    std::printf("swarm local: checkpoints in %s every %lld step(s)\n", checkpoints_at.c_str(),
                static_cast<long long>(checkpoint_every_ > 0 ? checkpoint_every_ : spec_.checkpoint.every_steps));
  else
    std::printf("swarm local: no checkpoints: a stage that loses every peer stops the job\n");
  std::fflush(stdout);
}

nlohmann::json LocalRun::merged() const {
  std::vector<nlohmann::json> rs;
  for (const auto& p : reports_) rs.push_back(read_json(p));
  return merge_reports(rs);
}

int LocalRun::run() {
  plan_processes();
  start_registry();
  if (!registry_up()) return fail("the registry did not start; its log:\n" + tail_of(children_[0].log, 20));
  plan_checkpoints();
  if (auto why = check_workers_per_stage()) return fail(*why);
  start_workers();
  start_trainers();
  write_processes();
  print_banner();
  if (auto rc = supervise()) return *rc;
  return finish();
}

bool LocalRun::trainers_running() const {
  for (const auto& c : children_)
    if (c.role == "trainer" && !c.exited()) return true;
  return false;
}

// Until every trainer exited, the job failed or the run is interrupted (nullopt: go on to
// finish()); an exit status when the run failed on the way (children already stopped).
std::optional<int> LocalRun::supervise() {
  // A trainer stops itself at max steps / max seconds; this bound only catches a hung run.
  const double hard_deadline = o_.max_seconds > 0 ? started_ + o_.max_seconds + 120 : 0;
  last_census_ = now_seconds();
  preemptions_ = std::make_unique<PreemptionSchedule>(popt_, now_seconds());
  stage_empty_.assign(spec_.pipeline.stages, 0.0);
  empty_since_.assign(spec_.pipeline.stages, 0.0);
  while (true) {
    reap(children_);
    if (!trainers_running()) return std::nullopt;
    if (auto why = restart_exited_registry()) return fail(*why);
    withdraw_dead_workers();
    if (preemptions_->enabled()) preempt();
    if (now_seconds() - last_census_ >= 0.5) census();
    if (auto why = lost_stage()) return fail(*why);
    if (job_failed()) return std::nullopt;
    if (stop_) {
      interrupted_ = true;
      return std::nullopt;
    }
    if (hard_deadline > 0 && now_seconds() > hard_deadline) return fail("the run did not end in time");
    if (o_.progress && now_seconds() - last_show_ >= 1.0) {
      show(merged(), max_steps_, tty_, false);
      last_show_ = now_seconds();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A worker process that died is gone now: tell discovery at once instead of letting its record
// expire (the operator does the same on pod deletion), so joiners see the empty slot.
// A call the registry did not answer (restarting, loaded) is tried again every half second, until
// it lands: a dead worker left in discovery holds its slot until its record expires, and what it
// held would be counted late.
void LocalRun::withdraw_dead_workers() {
  const double now = now_seconds();
  for (auto& c : children_) {
    if (c.role != "worker" || !c.exited() || c.withdrawn || now < c.withdraw_retry_at) continue;
    try {
      registry_->withdraw(c.name.substr(std::string("worker ").size()), /*settled=*/false);
      c.withdrawn = true;
    } catch (const std::exception& e) {
      spdlog::warn("could not withdraw {} from discovery (trying again): {}", c.name, e.what());
      c.withdraw_retry_at = now + 0.5;
    }
  }
}

// The preemption schedule's due actions: signal a victim, or start a joiner.
void LocalRun::preempt() {
  std::vector<std::string> alive;
  for (auto& c : children_)
    if (c.role == "worker" && !c.exited()) alive.push_back(c.name);
  const auto actions = preemptions_->due(now_seconds(), alive);
  // Counted in the registry until it lands (a failed call is tried again half a second later).
  const int64_t unreported = preemptions_->preemptions() - preemptions_reported_;
  if (unreported > 0 && now_seconds() >= preemptions_retry_at_) {
    try {
      registry_->add_event("preemptions", unreported);
      preemptions_reported_ += unreported;
    } catch (const std::exception& e) {
      spdlog::warn("could not count {} preemptions in the registry (trying again): {}", unreported, e.what());
      preemptions_retry_at_ = now_seconds() + 0.5;
    }
  }
  for (const auto& a : actions) {
    if (a.kind == PreemptionAction::Respawn) {
      start_worker("joiner" + std::to_string(joiners_++), -1, joiner_regions_.next());
      continue;
    }
    for (auto& c : children_) {
      if (c.name != a.victim || c.exited()) continue;
      spdlog::info("preempting {} ({})", c.name, a.kind == PreemptionAction::Kill ? "SIGKILL" : "SIGTERM");
      if (!c.preempted) joiner_regions_.preempted(c.region);
      c.preempted = true;
      c.proc.signal(a.kind == PreemptionAction::Kill ? SIGKILL : SIGTERM);
    }
  }
}

// Seconds each stage spent with no serving peer, as discovery sees it, and the serving capacity.
void LocalRun::census() {
  const double now = now_seconds();
  try {
    std::vector<int> serving(spec_.pipeline.stages, 0);
    for (const auto& p : registry_->peers("worker"))
      if (p.stage >= 0 && p.stage < spec_.pipeline.stages && planner::routable(p.state))
        serving[p.stage]++;
    bool all = true;
    for (int s = 0; s < spec_.pipeline.stages; ++s) all = all && serving[s] > 0;
    swarm_up_ = swarm_up_ || all;  // start-up is not an outage
    if (swarm_up_) {
      int total = 0;
      for (int n : serving) total += n;
      serving_worker_seconds_ += total * (now - last_census_);
      census_seconds_ += now - last_census_;
    }
    for (int s = 0; s < spec_.pipeline.stages && swarm_up_; ++s) {
      if (serving[s] == 0) stage_empty_[s] += now - last_census_;
      empty_since_[s] = serving[s] > 0 ? 0 : (empty_since_[s] > 0 ? empty_since_[s] : now);
    }
    final_peers_ = serving;
  } catch (const std::exception&) {
  }
  last_census_ = now;
}

// A stage with no serving peer stalls training; without respawns nothing will fill it.
std::optional<std::string> LocalRun::lost_stage() const {
  for (int s = 0; s < spec_.pipeline.stages && !preemptions_->enabled(); ++s) {
    if (empty_since_[s] == 0 || now_seconds() - empty_since_[s] < kStageLostSeconds) continue;
    std::string logs;
    for (auto& c : children_)
      if (c.role == "worker" && c.exited())
        logs += c.name + " (" + describe_exit(c.proc.status()) + "):\n" + tail_of(c.log, 15);
    return "stage " + std::to_string(s) + " has had no serving worker for " +
           std::to_string(static_cast<int>(kStageLostSeconds)) + " s; exited workers:\n" + logs;
  }
  return std::nullopt;
}

// Reads the registry's failure and event counts (every 0.5 s); true once the job failed.
bool LocalRun::job_failed() {
  if (now_seconds() - last_failure_check_ < 0.5) return false;
  last_failure_check_ = now_seconds();
  try {
    auto st = registry_->stats();
    if (st.contains("failure") && st["failure"].is_object()) failure_ = st["failure"];
    if (st.contains("events") && st["events"].is_object()) events_seen_ = st["events"];
  } catch (const std::exception&) {
  }
  if (failure_.is_null()) return false;
  if (o_.progress && tty_) std::printf("\n");
  spdlog::error("the job failed: {} of stage {} at step {}: {}", failure_.value("reason", "?"),
                failure_.value("stage", -1), failure_.value("step", int64_t{-1}), failure_.value("message", ""));
  return true;
}

// The registry's stats once the trainers stopped and every stage closed the step their last
// microbatches filled (a few seconds at most; `fallback` when the registry does not answer): the
// step invariant compares each stage's step with the samples the trainers completed.
nlohmann::json LocalRun::settled_stats(const nlohmann::json& fallback) {
  nlohmann::json st = fallback;
  for (const double until = now_seconds() + 10; now_seconds() < until;) {
    try {
      st = registry_->stats();
    } catch (const std::exception&) {
    }
    bool settled = st.is_object() && st.contains("stageOpenSamples");
    for (const auto& [k, v] : settled ? st["stageOpenSamples"].items() : nlohmann::json::object().items())
      settled = settled && v.is_number_integer() && v.get<int64_t>() < spec_.training.global_batch;
    if (settled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return st;
}

// Stops every child, writes and prints the summary; returns the exit status.
int LocalRun::finish() {
  nlohmann::json stats;
  try {
    stats = registry_->stats();
  } catch (const std::exception& e) {
    spdlog::warn("cannot read the registry's stats: {}", e.what());
  }
  // Trainers first (they finish in-flight microbatches and write their reports), then workers.
  // A failed job has microbatches in flight that can never finish (a stage is gone): waiting for
  // them would only wait out the request timeouts. A worker drains for up to drain_seconds_, then
  // writes its last checkpoint and its report: the grace must cover all three, or a large stage
  // (SmolLM2's first, 70 M parameters: 1.1 GB with AdamW's moments) is killed mid-write.
  stop_children(children_, "trainer", failure_.is_null() ? 30 : 5);
  if (failure_.is_null()) stats = settled_stats(stats);
  stop_children(children_, "worker", failure_.is_null() ? drain_seconds_ + kLastCheckpointSeconds : 5);
  stop_children(children_, "", 5);
  auto report = merged();
  if (o_.progress) show(report, max_steps_, tty_, true);
  auto summary = summary_of(report, stats);
  const CheckpointLocation checkpoints =
      checkpoint_dir_.empty() ? CheckpointLocation(spec_.checkpoint) : CheckpointLocation(checkpoint_dir_);
  if (report.value("finished", false) && failure_.is_null() && o_.baseline.empty())
    if (auto p = export_at_end(spec_, checkpoints, resolve_secret(spec_.secret))) summary["exported_model"] = *p;
  write_summary(o_.summary_path, summary);
  for (const char* k : {"loss_curve", "progress"}) summary.erase(k);
  std::printf("%s\n", summary.dump(2).c_str());
  return exit_status(report);
}

// The merged report plus what happened to the swarm during the run (elasticity accounting) and
// the registry's event counts.
nlohmann::json LocalRun::summary_of(const nlohmann::json& report, nlohmann::json stats) {
  auto summary = make_summary(report, o_.baseline.empty() ? "swarm" : o_.baseline, now_seconds() - started_);
  summary["logs"] = dir_;
  summary["preemptions"] = preemptions_->preemptions();
  if (!o_.regions.empty()) summary["regions"] = o_.regions;
  double empty_total = 0;
  for (double v : stage_empty_) empty_total += v;
  summary["stage_empty_seconds"] = empty_total;
  summary["initial_workers"] = total_workers_;
  summary["mean_serving_workers"] = census_seconds_ > 0 ? serving_worker_seconds_ / census_seconds_ : 0.0;
  if (!final_peers_.empty()) summary["peers_per_stage"] = final_peers_;
  const nlohmann::json events = stats.is_object() ? stats.value("events", nlohmann::json::object()) : nlohmann::json::object();
  summary["rebalance_moves"] = stats.is_object() ? stats.value("rebalanceMoves", int64_t{0}) : 0;
  // The registry's step of each stage, how far apart they are, and whether each one is the
  // trainers' count of global batches, or differs by what faults account for (issue 29).
  summary.update(stage_step_spread(stats));
  summary["step_invariant"] = step_invariant({stats, report, spec_.training.global_batch, spec_.training.microbatch,
                                              registry_restarts_});
  for (const char* k : {"checkpoint_restores", "checkpoint_steps_lost", "stage_steps_lost", "samples_lost", "handoffs",
                        "resyncs", "state_downloads", "stage_moves", "unaveraged_steps", "peers_lost", "checkpoint_failures",
                        "stale_handoffs_taken", "stale_handoff_samples", "handoff_samples_unconfirmed",
                        "samples_past_last_step", "samples_readmitted", "samples_unretried", "steps_short", "step_samples_short",
                        "steps_over", "step_samples_over"})
    summary[k] = events.value(k, int64_t{0});
  // What the workers counted themselves beside what the registry heard (they differ by the counts
  // of workers killed outright, and by any the registry never acknowledged: events_unacknowledged).
  std::vector<nlohmann::json> worker_reports;
  for (const auto& p : worker_reports_) worker_reports.push_back(read_json(p));
  const auto own = sum_worker_events(worker_reports);
  summary["worker_events"] = own["events"];
  summary["events_unacknowledged"] = own["events_unacknowledged"];
  if (stats.is_object() && stats.contains("failure")) failure_ = stats["failure"];
  if (!failure_.is_null()) summary["failure"] = failure_;
  return summary;
}

// kJobFailedExit for a failed job, 130 when interrupted, 1 when a trainer failed or training
// ended early, else 0.
int LocalRun::exit_status(const nlohmann::json& report) const {
  if (!failure_.is_null()) {
    std::printf("swarm local: FAILED: %s (stage %d, step %lld): %s\n", failure_.value("reason", "?").c_str(),
                failure_.value("stage", -1), static_cast<long long>(failure_.value("step", int64_t{-1})),
                failure_.value("message", "").c_str());
    std::fflush(stdout);
    return kJobFailedExit;
  }
  if (interrupted_) return 130;
  int rc = 0;
  for (auto& c : children_) {
    const int status = c.proc.status();
    if (c.role == "trainer" && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      spdlog::error("{} failed ({}); its log:\n{}", c.name, describe_exit(status), tail_of(c.log, 20));
      rc = 1;
    }
  }
  if (rc == 0 && o_.max_seconds <= 0 && !report.value("finished", false)) {
    spdlog::error("training ended before step {}", max_steps_);
    rc = 1;
  }
  return rc;
}

}  // namespace

int run_local(const LocalOptions& o, const std::atomic<bool>& stop) {
  const JobSpec spec = load_job_spec(o.job_path);
  if (!spec.cluster_only_fields.empty()) {
    std::string fields;
    for (const std::string& f : spec.cluster_only_fields) fields += (fields.empty() ? "" : ", ") + f;
    spdlog::info("{}: {} only place pods on Kubernetes (the operator reads them); swarm local ignores them",
                 o.job_path, fields);
  }
  check_model_init(spec);  // a Hugging Face checkpoint that does not fit: refused before any process starts
  const int64_t max_steps = o.steps > 0 ? o.steps : spec.training.max_steps;
  const double started = now_seconds();
  if (o.baseline == "single-process") return run_local_baseline(o, spec, max_steps, started, stop);
  if (o.baseline == "gpipe") {
    // The same processes and the GPipe schedule: N workers a stage (--workers-per-stage, all
    // equal, else spec.workers.perStage) make N pipelines of fixed workers, one trainer each.
    LocalOptions g = o;
    const int64_t n = o.workers_per_stage.empty() ? spec.workers.per_stage : o.workers_per_stage[0];
    std::string counts;
    for (int w : o.workers_per_stage) counts += (counts.empty() ? "" : ",") + std::to_string(w);
    for (int w : o.workers_per_stage)
      if (w != n)
        throw std::invalid_argument("--baseline gpipe: --workers-per-stage must be equal (one pipeline per worker "
                                    "of a stage), got " + counts);
    const int64_t micro = spec.training.global_batch / spec.training.microbatch;
    if (micro % n != 0)
      throw std::invalid_argument("--baseline gpipe: " + std::to_string(n) + " pipelines must share the global " +
                                  "batch's " + std::to_string(micro) + " microbatches evenly");
    g.workers_per_stage.assign(static_cast<size_t>(spec.pipeline.stages), static_cast<int>(n));
    return LocalRun(g, spec, stop, max_steps, started).run();
  }
  if (!o.baseline.empty())
    throw std::invalid_argument("--baseline: must be single-process or gpipe, got \"" + o.baseline + "\"");
  return LocalRun(o, spec, stop, max_steps, started).run();
}

}  // namespace swarm::runtime
