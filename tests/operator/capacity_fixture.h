// Shared by the capacity tests (operator_capacity_test.cc) and operator_bench's `mass-loss`: the
// multi-region layout of examples/multi-region-spot.yaml with GPUs counted (2 per node), foreign
// pods that hold GPUs, and a monitor of stage-unserved time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/operator/fixtures.h"

namespace swarm::optest {

inline const json kSpotTaint =
    json::array({{{"key", "cloud.google.com/gke-spot"}, {"value", "true"}, {"effect", "NoSchedule"}}});

inline void set_gpus(TestEnv& env, const std::string& node, int gpus) {
  env.client().patch("/api/v1/nodes/" + node + "/status",
                     {{"status", {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                                  {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}},
                     kube::PatchType::StrategicMerge);
}

inline void spot_node(TestEnv& env, const std::string& name, const std::string& region, const std::string& zone,
                      int gpus = 2) {
  env.create_node(name, {{"topology.kubernetes.io/region", region}, {"topology.kubernetes.io/zone", zone},
                         {"cloud.google.com/gke-spot", "true"}},
                  kSpotTaint);
  set_gpus(env, name, gpus);
}

inline void on_demand_node(TestEnv& env, const std::string& name, int gpus = 2) {
  env.create_node(name, {{"topology.kubernetes.io/region", "us-central1"},
                         {"topology.kubernetes.io/zone", "us-central1-a"},
                         {"swarm-operator.io/node-class", "on-demand"}});
  set_gpus(env, name, gpus);
}

// The incident's cluster: 3 spot nodes in us-central1, 3 in europe-west4, 1 on-demand; 2 GPUs each.
inline void create_seven_nodes(TestEnv& env) {
  for (int i = 0; i < 3; ++i) spot_node(env, "us-" + std::to_string(i), "us-central1", "us-central1-" + std::string(1, "abc"[i]));
  for (int i = 0; i < 3; ++i) spot_node(env, "eu-" + std::to_string(i), "europe-west4", "europe-west4-" + std::string(1, "abc"[i]));
  on_demand_node(env, "od-0");
}

// examples/multi-region-spot.yaml's pools and shape, one GPU per worker; `extra` adds fields
// under spec (placement, ...); `eu_extra` / `us_extra` add fields to those pools.
inline std::string gpu_spec(int stages, int per_stage, int max_per_stage, int us_max, const std::string& extra = "",
                            const std::string& us_extra = "", const std::string& eu_extra = "") {
  const std::string spot = "    nodeSelector: {cloud.google.com/gke-spot: \"true\"}\n"
                           "    tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: \"true\", effect: NoSchedule}]\n"
                           "    preemptible: true\n";
  return "  pipeline: {stages: " + std::to_string(stages) + "}\n"
         "  workers:\n    perStage: " + std::to_string(per_stage) + "\n    maxPerStage: " + std::to_string(max_per_stage) +
         "\n    resources: {requests: {cpu: \"1\", nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}\n"
         "  checkpoint: {path: /checkpoints}\n" + extra +
         "  nodePools:\n"
         "  - name: spot-us\n    region: us-central1\n" + spot + "    priority: 100\n    maxWorkers: " +
         std::to_string(us_max) + "\n" + us_extra +
         "  - name: spot-eu\n    region: europe-west4\n" + spot + "    priority: 50\n" + eu_extra +
         "  - name: on-demand\n    nodeSelector: {swarm-operator.io/node-class: on-demand}\n    priority: 10\n";
}

// A pod that is not ours, bound straight to `node` (no scheduler), holding `gpus` GPUs.
inline void foreign_gpu_pod(TestEnv& env, const std::string& name, const std::string& node, int gpus) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"app", "someone-else"}}}}},
              {"spec",
               {{"nodeName", node},
                {"tolerations", kSpotTaint},
                {"containers", json::array({{{"name", "c"}, {"image", "busybox"},
                                             {"resources", {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                                                            {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}};
  env.client().create("/api/v1/namespaces/default/pods", pod);
}

inline std::string pool_of(const json& pod) { return label(pod, "swarm-operator.io/pool"); }
inline std::string node_of(const json& pod) { return pod["spec"].value("nodeName", ""); }

inline bool is_ready(const json& pod) { return count_ready({pod}) == 1; }

// `n` ready live workers, none on `gone` (nodes just deleted: until the operator acts, their pods
// still look ready).
inline bool ready_off(TestEnv& env, const std::string& job, size_t n, const std::set<std::string>& gone) {
  auto ws = live_workers(env, job);
  if (ws.size() != n || count_ready(ws) != static_cast<int>(n)) return false;
  for (const auto& p : ws)
    if (gone.count(node_of(p))) return false;
  return true;
}

// Ready live workers per stage (bound = true: live workers bound to a node, i.e. scheduled).
inline std::map<int, int> ready_by_stage(TestEnv& env, const std::string& job, int stages, bool bound = false) {
  std::map<int, int> out;
  for (int s = 0; s < stages; ++s) out[s] = 0;
  for (const auto& p : live_workers(env, job))
    if (bound ? !node_of(p).empty() : is_ready(p)) ++out[std::stoi(label(p, "swarm-operator.io/stage"))];
  return out;
}

// Samples the job's workers every 100 ms on a thread of its own: seconds each stage had fewer
// than `min` ready workers (summed over stages); and fewer than `min` scheduled ones (bound to a
// node: what the operator and the scheduler decide, without the kubelet's start-up).
class StageMonitor {
 public:
  StageMonitor(TestEnv& env, std::string job, int stages, int min = 1)
      : env_(env), job_(std::move(job)), stages_(stages), min_(min) {
    thread_ = std::thread([this] { run(); });
  }
  ~StageMonitor() { stop(); }
  void stop() {
    if (stop_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    under_seconds_ = unscheduled_seconds_ = 0;
    for (auto& [s, v] : per_stage_) v = 0;
  }
  double under_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return under_seconds_;
  }
  double unscheduled_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unscheduled_seconds_;
  }
  std::map<int, double> per_stage() const {
    std::lock_guard<std::mutex> lock(mu_);
    return per_stage_;
  }
  // Blocks until `n` samples taken after the call have been counted (the state as of now is in
  // under_seconds()); false after `limit`.
  bool await_samples(int n, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) const {
    std::unique_lock<std::mutex> lock(mu_);
    const long target = samples_ + n;
    return sampled_.wait_for(lock, limit, [&] { return samples_ >= target; });
  }

 private:
  void run() {
    auto last = std::chrono::steady_clock::now();
    while (!stop_) {
      std::map<int, int> ready, bound;
      try {
        const auto ws = live_workers(env_, job_);
        for (int s = 0; s < stages_; ++s) ready[s] = bound[s] = 0;
        for (const auto& p : ws) {
          const int s = std::stoi(label(p, "swarm-operator.io/stage"));
          ready[s] += is_ready(p);
          bound[s] += !node_of(p).empty();
        }
      } catch (const std::exception&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - last).count();
      last = now;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [s, n] : ready)
          if (n < min_) {
            under_seconds_ += dt;
            per_stage_[s] += dt;
          }
        for (auto& [s, n] : bound)
          if (n < min_) unscheduled_seconds_ += dt;
        ++samples_;
      }
      sampled_.notify_all();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  TestEnv& env_;
  std::string job_;
  int stages_, min_;
  mutable std::mutex mu_;
  mutable std::condition_variable sampled_;
  long samples_ = 0;  // counted under mu_
  double under_seconds_ = 0, unscheduled_seconds_ = 0;
  std::map<int, double> per_stage_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace swarm::optest
