// The fault matrix's helpers: its job, polling, the registry's view (stats, serving workers,
// steps) and processes started one by one, as on Kubernetes (fault_matrix_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "registry/registry_client.h"
#include "tests/local/swarm_process.h"

namespace swarm::e2e {

// Small enough to train at a few steps per second on a loaded 2-core machine.
inline std::string job_body(int per_stage, int max_steps) {
  return R"(
  model: {hiddenSize: 64, numHeads: 4, layersPerStage: 1, sequenceLength: 64}
  pipeline: {stages: 2}
  training: {globalBatch: 32, microbatch: 4, maxSteps: )" +
         std::to_string(max_steps) + R"(}
  workers: {perStage: )" +
         std::to_string(per_stage) + R"(, threads: 1}
  trainers: {inflightMicrobatches: 4}
  timeouts: {heartbeatSeconds: 0.3, peerExpirySeconds: 1.5, forwardSeconds: 10, backwardSeconds: 10, averagingSeconds: 10}
  rebalancing: {enabled: false}
)";
}

inline int64_t num(const nlohmann::json& s, const char* k) { return s.value(k, int64_t{-1}); }

// Polls `ok` every 100 ms for up to `seconds`.
inline bool eventually(const std::function<bool()>& ok, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The registry's /v1/stats, or null while it does not answer. Unsigned: /v1/stats is open.
inline nlohmann::json stats_of(const std::string& url) {
  try {
    return swarm::registry::RegistryClient(url, std::chrono::milliseconds(2000), /*secret=*/"").stats();
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Workers the registry lists as serving (signed with the job secret the tests set).
inline int serving_workers(const std::string& url) {
  try {
    const char* secret = std::getenv("SWARM_JOB_SECRET");
    int n = 0;
    for (const auto& p : swarm::registry::RegistryClient(url, std::chrono::milliseconds(2000), secret ? secret : "")
                             .peers("worker"))
      n += p.state == swarm::planner::PeerState::Serving;
    return n;
  } catch (const std::exception&) {
    return -1;
  }
}

// The smallest of the stages' newest steps in the registry's stats; -1 when unknown.
inline int64_t registry_step(const nlohmann::json& st, int stages) {
  if (!st.is_object() || !st.contains("stageSteps")) return -1;
  int64_t step = INT64_MAX;
  for (int s = 0; s < stages; ++s) step = std::min(step, st["stageSteps"].value(std::to_string(s), int64_t{-1}));
  return step;
}

// Processes started one by one, as on Kubernetes; stopped (SIGTERM, in reverse order) at the end.
struct Processes {
  std::vector<pid_t> pids;
  ~Processes() {
    for (auto it = pids.rbegin(); it != pids.rend(); ++it) swarm::subprocess::signal(*it, SIGTERM);
    for (pid_t p : pids) wait_exit(p, 30);
  }
  void registry(const std::string& host, int port, const std::string& job, const std::string& log) {
    pids.push_back(start({"registry", "--host", host, "--port", std::to_string(port), "--peer-expiry", "1.5", "--job",
                          job},
                         log));
  }
  // Two workers per stage of a two-stage job, stage<s>-w<i>, logs in `dir`.
  void workers(const std::string& job, const std::string& registry, const std::string& dir) {
    for (int st = 0; st < 2; ++st)
      for (int i = 0; i < 2; ++i) {
        const std::string id = "stage" + std::to_string(st) + "-w" + std::to_string(i);
        pids.push_back(start({"worker", "--job", job, "--stage", std::to_string(st), "--peer-id", id, "--registry",
                              registry, "--threads", "1"},
                             dir + "/" + id + ".log"));
      }
  }
};

inline pid_t start_trainer(const std::string& job, const std::string& registry, const std::string& report, int steps) {
  return start({"trainer", "--job", job, "--index", "0", "--peer-id", "trainer0", "--registry", registry, "--report",
                report, "--steps", std::to_string(steps)},
               fs::path(report).replace_extension(".log").string());
}

inline std::string registry_url_of(const std::string& logs) {
  for (const auto& p : read_json(logs + "/processes.json"))
    if (p.value("role", "") == "registry") return p.value("url", "");
  return "";
}

}  // namespace swarm::e2e
