#include "worker/local/launcher.h"
#include "worker/local/local_run.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "common/cpu_cores.h"
#include "common/job_spec.h"
#include "common/subprocess.h"
#include "registry/registry_client.h"
#include "worker/local/baseline.h"
#include "worker/runtime/clock.h"
#include "common/ports.h"
#include "common/random_token.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/local/regions.h"
#include "worker/local/report.h"
#include "worker/local/preemption.h"

namespace fs = std::filesystem;

namespace swarm::runtime::local_run {

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

// A trainer started before a worker of its region had announced itself routes that stage abroad
// until its next look at the registry: 14 of 252 hops of a 30-step run under stress-ng
// (LocalRunRegions, 2026-12-07). A local run starts its workers together, so the trainers wait for
// them; a worker that does not come within this bound is started without.
constexpr double kWorkersAnnounceSeconds = 30;

void LocalRun::await_workers_announced() {
  size_t expected = 0;
  for (const auto& c : children_) expected += c.role == "worker" ? 1 : 0;
  for (double until = now_seconds() + kWorkersAnnounceSeconds; now_seconds() < until;) {
    reap(children_);
    for (const auto& c : children_)
      if (c.role == "worker" && c.exited()) return;
    try {
      if (registry_->peers("worker").size() >= expected) return;
    } catch (const std::exception&) {
      // The registry answers again in a moment, or supervise() finds it gone.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int LocalRun::run() {
  plan_processes();
  start_registry();
  if (!registry_up()) return fail("the registry did not start; its log:\n" + tail_of(children_[0].log, 20));
  plan_checkpoints();
  if (auto why = check_workers_per_stage()) return fail(*why);
  start_workers();
  await_workers_announced();
  start_trainers();
  write_processes();
  print_banner();
  if (auto rc = supervise()) return *rc;
  return finish();
}

}  // namespace swarm::runtime::local_run

namespace swarm::runtime {

using local_run::LocalRun;

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
