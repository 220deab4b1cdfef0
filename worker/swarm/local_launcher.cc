#include "worker/swarm/local_launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/job_spec.h"
#include "registry/registry_client.h"
#include "worker/swarm/baseline.h"
#include "worker/swarm/clock.h"
#include "worker/swarm/ports.h"
#include "worker/swarm/preemption.h"

namespace fs = std::filesystem;

namespace swarm::runtime {
namespace {

struct Child {
  std::string name;   // "registry", "worker s0 #1", "trainer 0"
  std::string role;
  int stage = -1;
  pid_t pid = -1;
  std::string log;
  bool exited = false;
  bool withdrawn = false;  // removed from discovery after it exited
  bool replaced = false;   // a registry that exited and was started again
  int status = 0;
};

std::string random_secret() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof(buf)) != 1) throw std::runtime_error("cannot generate a job secret");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : buf) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

// Starts `exe args...` with stdout/stderr appended to `log`. The child dies with the launcher
// (PR_SET_PDEATHSIG), so even a SIGKILLed launcher leaves no orphans behind.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args, const std::string& log) {
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    // Ctrl-C reaches the launcher, which stops children in order; they must not die first.
    ::setpgid(0, 0);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// A registry that keeps exiting is not coming back: the run stops after this many restarts.
constexpr int kMaxRegistryRestarts = 5;

void reap(std::vector<Child>& children) {
  for (auto& c : children) {
    if (c.exited || c.pid <= 0) continue;
    int status = 0;
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.exited = true;
      c.status = status;
    }
  }
}

void stop_children(std::vector<Child>& children, const std::string& role, double grace_seconds) {
  for (auto& c : children)
    if (!c.exited && (role.empty() || c.role == role)) ::kill(c.pid, SIGTERM);
  const double until = now_seconds() + grace_seconds;
  while (now_seconds() < until) {
    reap(children);
    bool alive = false;
    for (auto& c : children) alive = alive || (!c.exited && (role.empty() || c.role == role));
    if (!alive) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& c : children) {
    if (!c.exited && (role.empty() || c.role == role)) {
      spdlog::warn("{} did not stop within {} s; killing it", c.name, grace_seconds);
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &c.status, 0);
      c.exited = true;
    }
  }
}

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(f, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "    " + all[i] + "\n";
  return out;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "unknown status";
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  auto j = nlohmann::json::parse(f, nullptr, false);
  return j.is_discarded() ? nullptr : j;
}

// Sums or averages the trainers' reports into one.
nlohmann::json merge_reports(const std::vector<nlohmann::json>& reports) {
  nlohmann::json m = {{"steps", 0}, {"samples", 0}, {"samples_per_second", 0.0}, {"loss_first", 0.0},
                      {"loss_last", 0.0}, {"eval_loss", 0.0}, {"requests_retried", 0},
                      {"microbatches_lost", 0}, {"samples_recomputed", 0}, {"train_seconds", 0.0},
                      {"peers_per_stage", nlohmann::json::array()}, {"finished", true}};
  int n = 0;
  for (const auto& r : reports) {
    if (!r.is_object()) continue;
    ++n;
    m["steps"] = std::max(m["steps"].get<int64_t>(), r.value("steps", int64_t{0}));
    for (const char* k : {"samples", "requests_retried", "microbatches_lost", "samples_recomputed"})
      m[k] = m[k].get<int64_t>() + r.value(k, int64_t{0});
    m["samples_per_second"] = m["samples_per_second"].get<double>() + r.value("samples_per_second", 0.0);
    for (const char* k : {"loss_first", "loss_last", "eval_loss"}) m[k] = m[k].get<double>() + r.value(k, 0.0);
    m["train_seconds"] = std::max(m["train_seconds"].get<double>(), r.value("train_seconds", 0.0));
    if (r.contains("peers_per_stage")) m["peers_per_stage"] = r["peers_per_stage"];
    if (r.contains("loss_curve") && !m.contains("loss_curve")) m["loss_curve"] = r["loss_curve"];
    if (r.contains("progress") && !m.contains("progress")) m["progress"] = r["progress"];
    m["finished"] = m["finished"].get<bool>() && r.value("finished", false);
  }
  if (n > 0)
    for (const char* k : {"loss_first", "loss_last", "eval_loss"}) m[k] = m[k].get<double>() / n;
  if (n == 0) m["finished"] = false;
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

}  // namespace

nlohmann::json make_summary(const nlohmann::json& report, const std::string& mode, double wall_seconds) {
  nlohmann::json s = report;
  s["mode"] = mode;
  s["wall_seconds"] = wall_seconds;
  return s;
}

int run_local(const LocalOptions& o, const std::atomic<bool>& stop) {
  const JobSpec spec = load_job_spec(o.job_path);
  if (!spec.cluster_only_fields.empty()) {
    std::string fields;
    for (const std::string& f : spec.cluster_only_fields) fields += (fields.empty() ? "" : ", ") + f;
    spdlog::info("{}: {} only place pods on Kubernetes (the operator reads them); swarm local ignores them",
                 o.job_path, fields);
  }
  const int64_t max_steps = o.steps > 0 ? o.steps : spec.training.max_steps;
  const double started = now_seconds();
  const bool tty = o.progress && ::isatty(1);
  auto write_summary = [&](const nlohmann::json& summary) {
    if (o.summary_path.empty()) return;
    std::ofstream f(o.summary_path, std::ios::trunc);
    f << summary.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write summary " + o.summary_path);
  };

  if (o.baseline == "single-process") {
    BaselineOptions bo;
    bo.max_steps = max_steps;
    bo.max_seconds = o.max_seconds;
    bo.threads = o.threads_per_worker;
    if (o.progress) bo.on_progress = [&](const TrainerReport& r) { show(r.to_json(), max_steps, tty, false); };
    auto report = run_single_process(spec, bo, stop).to_json();
    if (o.progress) show(report, max_steps, tty, true);
    auto summary = make_summary(report, "single-process", now_seconds() - started);
    summary.erase("loss_curve");
    summary.erase("progress");
    write_summary(make_summary(report, "single-process", now_seconds() - started));
    std::printf("%s\n", summary.dump(2).c_str());
    return stop ? 130 : 0;
  }
  if (!o.baseline.empty())
    throw std::invalid_argument("--baseline: must be single-process, got \"" + o.baseline + "\"");

  // The data-plane secret: the spec's environment variable, or a fresh one for this run.
  const char* env_secret = std::getenv(spec.secret.env.c_str());
  if (!env_secret || !*env_secret) ::setenv(spec.secret.env.c_str(), random_secret().c_str(), 1);

  const std::string dir = o.log_dir.empty()
                              ? (fs::temp_directory_path() / ("swarm-local-" + std::to_string(::getpid()))).string()
                              : o.log_dir;
  fs::create_directories(dir);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int total_workers = static_cast<int>(spec.pipeline.stages * spec.workers.per_stage);
  if (!o.workers_per_stage.empty()) {
    total_workers = 0;
    for (int n : o.workers_per_stage) total_workers += n;
  }
  const int threads = o.threads_per_worker > 0 ? o.threads_per_worker
                      : spec.workers.threads > 0 ? static_cast<int>(spec.workers.threads)
                                                 : std::max(1, cores / total_workers);
  const int registry_port = pick_free_port();
  const std::string registry_url = "http://127.0.0.1:" + std::to_string(registry_port);
  std::vector<Child> children;
  auto start = [&](Child c, const std::vector<std::string>& args) {
    c.log = dir + "/" + c.log;
    std::vector<std::string> full = {"--log-level", o.log_level};
    full.insert(full.end(), args.begin(), args.end());
    c.pid = spawn(o.self_exe, full, c.log);
    children.push_back(c);
  };
  auto fail = [&](const std::string& why) {
    spdlog::error("{}", why);
    stop_children(children, "trainer", 5);
    stop_children(children, "", 5);
    return 1;
  };

  auto start_registry = [&] {
    start({"registry", "registry", -1, -1, "registry.log"},
          {"registry", "--host", "127.0.0.1", "--port", std::to_string(registry_port), "--peer-expiry",
           std::to_string(spec.timeouts.peer_expiry_seconds), "--job", o.job_path});
  };
  registry::RegistryClient registry(registry_url, std::chrono::milliseconds(1000));
  // Waits for the newest registry process to answer; false if it exited or did not in time.
  auto registry_up = [&] {
    for (double until = now_seconds() + 15; !registry.healthy();) {
      reap(children);
      if (children.back().exited || now_seconds() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  };
  start_registry();
  if (!registry_up()) return fail("the registry did not start; its log:\n" + tail_of(children[0].log, 20));
  const PreemptionOptions popt{o.preempt_every, o.preempt_notice, o.respawn_after,
                               o.seed >= 0 ? static_cast<uint64_t>(o.seed) : spec.training.seed};
  // A stage that loses its last peer comes back from its checkpoint, or the job stops (a stage
  // must never train on from its initial parameters: issue 11). With no checkpoint location in the
  // spec, the run keeps checkpoints next to its logs whenever a stage can lose its last peer: it
  // has a single one, or preemptions are on. Preemptions take peers every few seconds, so then
  // every step is kept (a few MB per stage; the write is atomic and prunes older ones).
  bool single_peer_stage = false;
  for (int s = 0; s < spec.pipeline.stages; ++s) {
    const int n = o.workers_per_stage.empty() ? static_cast<int>(spec.workers.per_stage)
                  : s < static_cast<int>(o.workers_per_stage.size()) ? o.workers_per_stage[s] : 0;
    single_peer_stage = single_peer_stage || n <= 1;
  }
  const bool default_checkpoints =
      spec.checkpoint.path.empty() && !o.no_checkpoints &&
      (popt.every_seconds > 0 || single_peer_stage || o.checkpoint_every > 0);
  const std::string checkpoint_dir = default_checkpoints ? dir + "/checkpoints" : "";
  const int64_t checkpoint_every =
      o.checkpoint_every > 0 ? o.checkpoint_every
      : default_checkpoints ? std::min<int64_t>(spec.checkpoint.every_steps, popt.every_seconds > 0 ? 1 : 10)
                            : 0;
  const double drain_seconds = o.preempt_notice > 0 ? o.preempt_notice : 10;
  auto start_worker = [&](const std::string& id, int s) {
    std::vector<std::string> args = {"worker", "--job", o.job_path, "--stage", s >= 0 ? std::to_string(s) : "auto",
                                     "--peer-id", id, "--registry", registry_url, "--threads",
                                     std::to_string(threads), "--drain-seconds", std::to_string(drain_seconds)};
    if (!checkpoint_dir.empty()) args.insert(args.end(), {"--checkpoint-dir", checkpoint_dir});
    if (checkpoint_every > 0) args.insert(args.end(), {"--checkpoint-every", std::to_string(checkpoint_every)});
    if (auto it = o.slow_workers.find(id); it != o.slow_workers.end())
      args.insert(args.end(), {"--slowdown", std::to_string(it->second)});
    start({"worker " + id, "worker", s, -1, id + ".log"}, args);
  };
  if (!o.workers_per_stage.empty() && static_cast<int64_t>(o.workers_per_stage.size()) != spec.pipeline.stages)
    return fail("--workers-per-stage: expected " + std::to_string(spec.pipeline.stages) + " counts, got " +
                std::to_string(o.workers_per_stage.size()));
  for (int s = 0; s < spec.pipeline.stages; ++s) {
    const int n = o.workers_per_stage.empty() ? static_cast<int>(spec.workers.per_stage) : o.workers_per_stage[s];
    for (int i = 0; i < n; ++i) start_worker("stage" + std::to_string(s) + "-w" + std::to_string(i), s);
  }
  std::vector<std::string> reports;
  for (int t = 0; t < spec.trainers.count; ++t) {
    const std::string id = "trainer" + std::to_string(t);
    reports.push_back(dir + "/" + id + ".json");
    std::vector<std::string> args = {"trainer", "--job", o.job_path, "--index", std::to_string(t), "--peer-id", id,
                                     "--registry", registry_url, "--report", reports.back(), "--steps",
                                     std::to_string(max_steps)};
    if (o.max_seconds > 0) args.insert(args.end(), {"--max-seconds", std::to_string(o.max_seconds)});
    start({"trainer " + id, "trainer", -1, -1, id + ".log"}, args);
  }
  auto write_processes = [&] {
    // Which process is which, for operators of the run (and tests that kill one on purpose).
    nlohmann::json procs = nlohmann::json::array();
    for (const auto& c : children) {
      if (c.replaced) continue;
      procs.push_back({{"name", c.name}, {"role", c.role}, {"stage", c.stage}, {"pid", c.pid}, {"log", c.log}});
      if (c.role == "registry") {
        procs.back()["url"] = registry_url;
        procs.back()["checkpoints"] = checkpoint_dir.empty() ? spec.checkpoint.path : checkpoint_dir;
      }
    }
    std::ofstream(dir + "/processes.json") << procs.dump(2) << "\n";
  };
  write_processes();
  std::printf("swarm local: %s, %lld stages x %lld workers, %lld trainer(s), %d torch thread(s) per worker; logs in %s\n",
              spec.name.c_str(), static_cast<long long>(spec.pipeline.stages),
              static_cast<long long>(spec.workers.per_stage), static_cast<long long>(spec.trainers.count), threads,
              dir.c_str());
  const std::string checkpoints_at = checkpoint_dir.empty() ? spec.checkpoint.path : checkpoint_dir;
  if (!checkpoints_at.empty())
    std::printf("swarm local: checkpoints in %s every %lld step(s)\n", checkpoints_at.c_str(),
                static_cast<long long>(checkpoint_every > 0 ? checkpoint_every : spec.checkpoint.every_steps));
  else
    std::printf("swarm local: no checkpoints: a stage that loses every peer stops the job\n");
  std::fflush(stdout);

  auto merged = [&] {
    std::vector<nlohmann::json> rs;
    for (const auto& p : reports) rs.push_back(read_json(p));
    return merge_reports(rs);
  };
  // A trainer stops itself at max steps / max seconds; this bound only catches a hung run.
  const double hard_deadline = o.max_seconds > 0 ? started + o.max_seconds + 120 : 0;
  double last_show = 0, last_census = now_seconds();
  bool interrupted = false;
  PreemptionSchedule preemptions(popt, now_seconds());
  int joiners = 0;
  std::vector<double> stage_empty(spec.pipeline.stages, 0.0);
  std::vector<int> final_peers;
  bool swarm_up = false;
  double serving_worker_seconds = 0, census_seconds = 0;  // capacity actually alive
  std::vector<double> empty_since(spec.pipeline.stages, 0.0);
  constexpr double kStageLostSeconds = 20;
  nlohmann::json failure;  // the registry's "failure" once a worker reported one
  double last_failure_check = 0;
  nlohmann::json events_seen = nlohmann::json::object();  // the registry's events, last read
  int registry_restarts = 0;
  // The registry exited: start it again at the same address (peers re-announce their stage,
  // step and state on their next heartbeat, and the new one rebuilds its view from them) and
  // give it the events counted so far. Events counted after the last read (0.5 s) are lost.
  auto restart_registry = [&](const std::string& how) {
    if (++registry_restarts > kMaxRegistryRestarts) return false;
    spdlog::warn("the registry exited ({}); starting it again on {}", how, registry_url);
    start_registry();
    if (!registry_up()) return false;
    for (const auto& [kind, count] : events_seen.items()) {
      try {
        if (count.is_number_integer() && count.get<int64_t>() > 0) registry.add_event(kind, count.get<int64_t>());
      } catch (const std::exception&) {
      }
    }
    write_processes();
    std::printf("swarm local: restarted the registry (%s before); peers re-announce to it\n", how.c_str());
    std::fflush(stdout);
    return true;
  };
  while (true) {
    reap(children);
    bool trainers_running = false;
    for (auto& c : children) trainers_running = trainers_running || (c.role == "trainer" && !c.exited);
    if (!trainers_running) break;
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i].role != "registry" || !children[i].exited || children[i].replaced) continue;
      const Child old = children[i];  // `children` grows: no reference into it
      children[i].replaced = true;
      if (!restart_registry(describe_exit(old.status)))
        return fail("the registry exited (" + describe_exit(old.status) + ") and could not be started again; its log:\n" +
                    tail_of(old.log, 20));
      break;  // `children` grew
    }
    // A worker process that died is gone now: tell discovery at once instead of letting its record
    // expire (the operator does the same on pod deletion), so joiners see the empty slot.
    for (auto& c : children) {
      if (c.role == "worker" && c.exited && !c.withdrawn) {
        c.withdrawn = true;
        try {
          registry.withdraw(c.name.substr(std::string("worker ").size()), /*settled=*/false);
        } catch (const std::exception&) {
        }
      }
    }
    if (preemptions.enabled()) {
      std::vector<std::string> alive;
      for (auto& c : children)
        if (c.role == "worker" && !c.exited) alive.push_back(c.name);
      const int64_t before = preemptions.preemptions();
      const auto actions = preemptions.due(now_seconds(), alive);
      if (preemptions.preemptions() > before) {
        try {
          registry.add_event("preemptions", preemptions.preemptions() - before);
        } catch (const std::exception&) {
        }
      }
      for (const auto& a : actions) {
        if (a.kind == PreemptionAction::Respawn) {
          start_worker("joiner" + std::to_string(joiners++), -1);
          continue;
        }
        for (auto& c : children) {
          if (c.name != a.victim || c.exited) continue;
          spdlog::info("preempting {} ({})", c.name, a.kind == PreemptionAction::Kill ? "SIGKILL" : "SIGTERM");

          ::kill(c.pid, a.kind == PreemptionAction::Kill ? SIGKILL : SIGTERM);
        }
      }
    }
    if (now_seconds() - last_census >= 0.5) {
      // Seconds each stage spent with no serving peer, as discovery sees it.
      const double now = now_seconds();
      try {
        std::vector<int> serving(spec.pipeline.stages, 0);
        for (const auto& p : registry.peers("worker"))
          if (p.stage >= 0 && p.stage < spec.pipeline.stages && (p.state == "serving" || p.state == "averaging"))
            serving[p.stage]++;
        bool all = true;
        for (int s = 0; s < spec.pipeline.stages; ++s) all = all && serving[s] > 0;
        swarm_up = swarm_up || all;  // start-up is not an outage
        if (swarm_up) {
          int total = 0;
          for (int n : serving) total += n;
          serving_worker_seconds += total * (now - last_census);
          census_seconds += now - last_census;
        }
        for (int s = 0; s < spec.pipeline.stages && swarm_up; ++s) {
          if (serving[s] == 0) stage_empty[s] += now - last_census;
          empty_since[s] = serving[s] > 0 ? 0 : (empty_since[s] > 0 ? empty_since[s] : now);
        }
        final_peers = serving;
      } catch (const std::exception&) {
      }
      last_census = now;
    }
    // A stage with no serving peer stalls training; without respawns nothing will fill it.
    for (int s = 0; s < spec.pipeline.stages && !preemptions.enabled(); ++s) {
      if (empty_since[s] == 0 || now_seconds() - empty_since[s] < kStageLostSeconds) continue;
      std::string logs;
      for (auto& c : children)
        if (c.role == "worker" && c.exited)
          logs += c.name + " (" + describe_exit(c.status) + "):\n" + tail_of(c.log, 15);
      return fail("stage " + std::to_string(s) + " has had no serving worker for " +
                  std::to_string(static_cast<int>(kStageLostSeconds)) + " s; exited workers:\n" + logs);
    }
    if (now_seconds() - last_failure_check >= 0.5) {
      last_failure_check = now_seconds();
      try {
        auto st = registry.stats();
        if (st.contains("failure") && st["failure"].is_object()) failure = st["failure"];
        if (st.contains("events") && st["events"].is_object()) events_seen = st["events"];
      } catch (const std::exception&) {
      }
      if (!failure.is_null()) {
        if (o.progress && tty) std::printf("\n");
        spdlog::error("the job failed: {} of stage {} at step {}: {}", failure.value("reason", "?"),
                      failure.value("stage", -1), failure.value("step", int64_t{-1}), failure.value("message", ""));
        break;
      }
    }
    if (stop) {
      interrupted = true;
      break;
    }
    if (hard_deadline > 0 && now_seconds() > hard_deadline) return fail("the run did not end in time");
    if (o.progress && now_seconds() - last_show >= 1.0) {
      show(merged(), max_steps, tty, false);
      last_show = now_seconds();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nlohmann::json stats;
  try {
    stats = registry.stats();
  } catch (const std::exception& e) {
    spdlog::warn("cannot read the registry's stats: {}", e.what());
  }
  // Trainers first (they finish in-flight microbatches and write their reports), then workers.
  // A failed job has microbatches in flight that can never finish (a stage is gone): waiting for
  // them would only wait out the request timeouts.
  stop_children(children, "trainer", failure.is_null() ? 30 : 5);
  stop_children(children, "worker", failure.is_null() ? 10 : 5);
  stop_children(children, "", 5);
  auto report = merged();
  if (o.progress) show(report, max_steps, tty, true);
  auto summary = make_summary(report, "swarm", now_seconds() - started);
  summary["logs"] = dir;
  // Elasticity accounting: what happened to the swarm during the run.
  summary["preemptions"] = preemptions.preemptions();
  double empty_total = 0;
  for (double v : stage_empty) empty_total += v;
  summary["stage_empty_seconds"] = empty_total;
  summary["initial_workers"] = total_workers;
  summary["mean_serving_workers"] = census_seconds > 0 ? serving_worker_seconds / census_seconds : 0.0;
  if (!final_peers.empty()) summary["peers_per_stage"] = final_peers;
  const nlohmann::json events = stats.is_object() ? stats.value("events", nlohmann::json::object()) : nlohmann::json::object();
  summary["rebalance_moves"] = stats.is_object() ? stats.value("rebalanceMoves", int64_t{0}) : 0;
  for (const char* k : {"checkpoint_restores", "checkpoint_steps_lost", "stage_steps_lost", "samples_lost", "handoffs",
                        "resyncs", "state_downloads", "stage_moves", "unaveraged_steps", "peers_lost", "checkpoint_failures"})
    summary[k] = events.value(k, int64_t{0});
  if (stats.is_object() && stats.contains("failure")) failure = stats["failure"];
  if (!failure.is_null()) summary["failure"] = failure;
  write_summary(summary);
  summary.erase("loss_curve");
  summary.erase("progress");
  std::printf("%s\n", summary.dump(2).c_str());
  if (!failure.is_null()) {
    std::printf("swarm local: FAILED: %s (stage %d, step %lld): %s\n", failure.value("reason", "?").c_str(),
                failure.value("stage", -1), static_cast<long long>(failure.value("step", int64_t{-1})),
                failure.value("message", "").c_str());
    std::fflush(stdout);
    return kJobFailedExit;
  }
  if (interrupted) return 130;
  int rc = 0;
  for (auto& c : children) {
    if (c.role == "trainer" && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
      spdlog::error("{} failed ({}); its log:\n{}", c.name, describe_exit(c.status), tail_of(c.log, 20));
      rc = 1;
    }
  }
  if (rc == 0 && o.max_seconds <= 0 && !report.value("finished", false)) {
    spdlog::error("training ended before step {}", max_steps);
    rc = 1;
  }
  return rc;
}

}  // namespace swarm::runtime
