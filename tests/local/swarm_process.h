// Helpers of the end-to-end tests that run `build/bin/swarm` as a user does: separate processes on
// loopback, a fresh directory per test, summaries and reports read back as JSON.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/subprocess.h"

namespace swarm::e2e {

namespace fs = std::filesystem;

inline const std::string kSwarm = std::string(SWARM_BINARY_DIR) + "/bin/swarm";

inline std::string fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("swarm-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  auto j = nlohmann::json::parse(f, nullptr, false);
  return j.is_discarded() ? nullptr : j;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Starts `swarm args...` with output to `log` (truncated first); returns its pid. The child stays
// in the test's process group and inherits its stdin, as a program started from a shell does.
inline pid_t start(const std::vector<std::string>& args, const std::string& log) {
  subprocess::SpawnOptions o;
  o.log_path = log;
  o.append_log = false;
  o.own_group = false;
  o.die_with_parent = false;
  o.null_stdin = false;
  return subprocess::spawn(kSwarm, args, o);
}

// Waits for `pid` up to `seconds`; returns its exit code (128+signal), or -1 on timeout (killed).
inline int wait_exit(pid_t pid, double seconds) {
  int status = 0;
  if (subprocess::reap_within(pid, seconds, &status, 50)) return subprocess::exit_code(status);
  subprocess::kill_and_reap(pid, /*group=*/false);
  return -1;
}

inline int run(const std::vector<std::string>& args, const std::string& log, double seconds) {
  return wait_exit(start(args, log), seconds);
}

inline std::string write_job(const std::string& dir, const std::string& spec_body) {
  const std::string path = dir + "/job.yaml";
  std::ofstream(path) << "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata: {name: e2e}\nspec:\n"
                      << spec_body;
  return path;
}

// Waits until the trainer's report shows at least `steps` steps.
inline bool wait_for_steps(const std::string& report, int64_t steps, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    auto r = read_json(report);
    if (r.is_object() && r.value("steps", int64_t{0}) >= steps) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

inline pid_t pid_of(const std::string& dir, const std::string& name) {
  auto procs = read_json(dir + "/processes.json");
  for (const auto& p : procs)
    if (p.value("name", "") == name) return p.value("pid", -1);
  return -1;
}

}  // namespace swarm::e2e
