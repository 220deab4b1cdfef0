// Shared set-up of the data-plane tests: a tiny job, a registry on loopback, workers in-process.
#pragma once

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/job_spec.h"
#include "registry/registry_server.h"
#include "worker/stage/stage_server.h"
#include "worker/trainer/trainer.h"

namespace swarm::testing {

inline constexpr const char* kSecret = "test-secret-0123456789";

// A job small enough to train in seconds on 2 cores.
inline JobSpec tiny_job(int stages = 2, int64_t max_steps = 4) {
  auto spec = parse_job_spec(R"(
apiVersion: swarm-operator.io/v1alpha1
kind: SwarmJob
metadata: {name: tiny-test}
spec:
  model: {hiddenSize: 32, numHeads: 2, layersPerStage: 1, sequenceLength: 16}
  training:
    globalBatch: 16
    microbatch: 4
    maxSteps: 4
    schedule: {kind: constant, warmupSteps: 0}
  trainers: {inflightMicrobatches: 3}
  timeouts: {forwardSeconds: 10, backwardSeconds: 10, averagingSeconds: 10, heartbeatSeconds: 0.2, peerExpirySeconds: 1}
)");
  spec.pipeline.stages = stages;
  spec.training.max_steps = max_steps;
  return spec;
}

// A registry (which takes only requests signed with kSecret) and per_stage in-process workers per stage on loopback; `adjust` may change each
// worker's options before it starts (precision knobs, ...).
struct LocalSwarm {
  using Adjust = std::function<void(runtime::WorkerOptions&)>;
  explicit LocalSwarm(JobSpec s, int per_stage, Adjust adjust_worker = nullptr)
      : spec(std::move(s)), adjust(std::move(adjust_worker)) {
    registry::RegistryOptions ro;
    ro.peer_expiry_seconds = spec.timeouts.peer_expiry_seconds;
    ro.num_stages = static_cast<int>(spec.pipeline.stages);  // as `swarm registry --job` (no rebalancing)
    ro.secret = kSecret;  // every request signed, as with `swarm registry`
    registry = std::make_unique<registry::RegistryServer>("127.0.0.1", 0, ro);
    registry->start();
    for (int st = 0; st < spec.pipeline.stages; ++st)
      for (int i = 0; i < per_stage; ++i) add_worker(st, i);
  }
  runtime::StageServer& add_worker(int stage, int i) {
    runtime::WorkerOptions o;
    o.spec = spec;
    o.stage = stage;
    o.peer_id = "stage" + std::to_string(stage) + "-w" + std::to_string(i);
    o.registry_url = registry->url();
    o.secret = kSecret;
    o.threads = 1;
    if (adjust) adjust(o);
    workers.push_back(std::make_unique<runtime::StageServer>(o));
    workers.back()->start();
    return *workers.back();
  }
  ~LocalSwarm() {
    for (auto& w : workers) w->stop();
    registry->stop();
  }
  JobSpec spec;
  Adjust adjust;
  std::unique_ptr<registry::RegistryServer> registry;
  std::vector<std::unique_ptr<runtime::StageServer>> workers;
};

// Runs one in-process trainer against `swarm` until every stage took `steps` steps.
inline runtime::TrainerReport train(LocalSwarm& swarm, int64_t steps) {
  runtime::TrainerOptions t;
  t.spec = swarm.spec;
  t.peer_id = "trainer0";
  t.registry_url = swarm.registry->url();
  t.secret = kSecret;
  t.max_steps = steps;
  t.eval_batches = 1;
  std::atomic<bool> stop{false};
  return runtime::Trainer(t).run(stop);
}

// Runs a shell command; returns its exit code (-1 if it did not exit normally) and its stdout and
// stderr together.
inline std::pair<int, std::string> shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = ::pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

// GET /metrics of a process on loopback (curl, as a scraper would); "" when it fails.
inline std::string scrape_metrics(int port) {
  return shell("curl -sf http://127.0.0.1:" + std::to_string(port) + "/metrics").second;
}

// The value of the first sample of metric `name` in a Prometheus exposition; NaN when absent.
inline double metric_sample(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at > 0 && text[at - 1] != '\n') continue;  // a comment, or a longer name ending in it
    const char next = at + name.size() < text.size() ? text[at + name.size()] : '\n';
    if (next != '{' && next != ' ') continue;  // a longer name starting with it
    const size_t eol = text.find('\n', at);
    const std::string line = text.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nan("");
}

}  // namespace swarm::testing
