// operator_bench: figures for docs/operator.md, no assertions.
//   operator_bench reclaim [N=50]   N sequential reclaim notices (GKE termination taint); for each,
//                                   seconds from the taint write to the replacement pod's ADDED
//                                   event on a watch; prints p50/p99/max.
//   operator_bench scale [JOBS=50] [WORKERS=64] [SECONDS=60]
//                                   JOBS jobs x WORKERS workers; operator RSS and API requests per
//                                   minute while idle, then under churn (a node reclaimed every 5 s).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "operator/kube/config.h"

#include "operator/kube/informer.h"
#include "tests/operator/fixtures.h"

using namespace swarm::optest;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

double total_requests(const TestEnv::Operator& op) {
  double sum = 0;
  for (const char* v : {"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"}) {
    double x = op.metric(std::string("swarm_operator_api_requests_total{verb=\"") + v + "\"}");
    if (x > 0) sum += x;
  }
  return sum;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

void spot_nodes(TestEnv& env, int n, int pods_capacity) {
  for (int i = 0; i < n; ++i) {
    const std::string name = "spot-" + std::to_string(i);
    env.create_node(name, {{"topology.kubernetes.io/region", "r1"},
                           {"topology.kubernetes.io/zone", "r1-" + std::to_string(i % 3)},
                           {"cloud.google.com/gke-spot", "true"}});
    if (pods_capacity != 110)
      env.client().patch("/api/v1/nodes/" + name + "/status",
                         {{"status", {{"capacity", {{"pods", std::to_string(pods_capacity)}}},
                                      {"allocatable", {{"pods", std::to_string(pods_capacity)}}}}}},
                         swarm::kube::PatchType::StrategicMerge);
  }
}

int bench_reclaim(int n) {
  TestEnv env;
  env.start_fake_kubelet();
  spot_nodes(env, n + 12, 110);
  auto op = env.start_operator({"--log-level", "info"});
  // Our own watch on worker pods: ADDED times of new pods.
  swarm::kube::Client client(swarm::kube::load_kubeconfig(env.kubeconfig()), {1000, 1000});
  swarm::kube::Informer pods(client, {"v1", "pods", "default", "swarm-operator.io/role=worker"});
  std::mutex mu;
  std::map<std::string, Clock::time_point> added;
  pods.add_handler([&](swarm::kube::EventType t, const json& o, const json*) {
    if (t != swarm::kube::EventType::Added) return;
    std::lock_guard<std::mutex> lock(mu);
    added.emplace(o["metadata"].value("uid", ""), Clock::now());
  });
  pods.start();
  pods.wait_synced(10s);
  env.apply_yaml(job_yaml("bench", "  pipeline: {stages: 2}\n  workers: {perStage: 5}\n"
                                   "  nodePools:\n  - {name: spot, preemptible: true}\n"));
  if (!wait_until([&] { return count_ready(live_workers(env, "bench")) == 10; }, 60s)) {
    std::cerr << "job did not become ready\n";
    return 1;
  }
  std::vector<double> lat;
  std::set<std::string> tainted;
  for (int i = 0; i < n; ++i) {
    auto ws = live_workers(env, "bench");
    std::string node;
    for (const auto& p : ws)
      if (count_ready({p}) && !tainted.count(p["spec"].value("nodeName", ""))) node = p["spec"].value("nodeName", "");
    if (node.empty()) break;
    size_t before;
    {
      std::lock_guard<std::mutex> lock(mu);
      before = added.size();
    }
    const auto t0 = Clock::now();
    env.add_taint(node, "cloud.google.com/impending-node-termination");
    tainted.insert(node);
    Clock::time_point t1;
    if (!wait_until([&] {
          std::lock_guard<std::mutex> lock(mu);
          if (added.size() == before) return false;
          t1 = Clock::time_point::max();
          for (auto& [k, t] : added)
            if (t >= t0) t1 = std::min(t1, t);
          return t1 != Clock::time_point::max();
        }, 10s)) {
      std::cerr << "no replacement for reclaim " << i << "\n";
      continue;
    }
    lat.push_back(std::chrono::duration<double>(t1 - t0).count());
    wait_until([&] { return count_ready(live_workers(env, "bench")) == 10; }, 20s);
  }
  pods.stop();
  std::printf("reclaims: %zu\nnotice->replacement created: p50 %.3f s  p99 %.3f s  max %.3f s\n", lat.size(),
              percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1.0));
  std::printf("operator histogram swarm_operator_reclaim_to_replacement_seconds: count %.0f sum %.3f\n",
              op.metric("swarm_operator_reclaim_to_replacement_seconds_count"),
              op.metric("swarm_operator_reclaim_to_replacement_seconds_sum"));
  return 0;
}

int bench_scale(int jobs, int workers, int seconds) {
  TestEnv env;
  const int per_node = 100;
  const int nodes = (jobs * (workers + 2)) / per_node + 8;
  spot_nodes(env, nodes, per_node + 10);
  // Production lease timings (15 s / 10 s / 2 s): the idle figure includes the renewals.
  auto op = env.start_operator({"--log-level", "warn", "--qps", "200", "--burst", "400", "--lease-duration", "15",
                                "--renew-deadline", "10", "--retry-period", "2"});
  env.start_fake_kubelet();
  const auto t0 = Clock::now();
  std::string all;
  for (int j = 0; j < jobs; ++j) {
    all += job_yaml("job-" + std::to_string(j), "  pipeline: {stages: 4}\n  workers: {perStage: " + std::to_string(workers / 4) +
                                                      "}\n  nodePools:\n  - {name: spot, preemptible: true}\n") + "---\n";
  }
  env.apply_yaml(all);
  const int total = jobs * workers;
  const bool ok = wait_until([&] { return count_ready(env.pods("swarm-operator.io/role=worker")) >= total; }, 900s);
  std::printf("%d jobs x %d workers: %s in %.0f s (scheduler + fake kubelet included)\n", jobs, workers,
              ok ? "all ready" : "NOT all ready", std::chrono::duration<double>(Clock::now() - t0).count());
  std::this_thread::sleep_for(10s);
  double r0 = total_requests(op);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  double r1 = total_requests(op);
  std::printf("idle: RSS %.1f MiB, API requests %.1f /min\n", rss_mib(op.proc.pid), (r1 - r0) * 60.0 / seconds);
  // Churn: one node reclaimed every 5 s.
  r0 = total_requests(op);
  const auto c0 = Clock::now();
  int i = 0;
  double peak = 0;
  while (Clock::now() - c0 < std::chrono::seconds(seconds)) {
    env.add_taint("spot-" + std::to_string(i++), "cloud.google.com/impending-node-termination");
    for (int k = 0; k < 10; ++k) {
      peak = std::max(peak, rss_mib(op.proc.pid));
      std::this_thread::sleep_for(500ms);
    }
  }
  r1 = total_requests(op);
  std::printf("churn (%d nodes reclaimed in %d s): RSS %.1f MiB (peak %.1f), API requests %.1f /min\n", i, seconds,
              rss_mib(op.proc.pid), peak, (r1 - r0) * 60.0 / seconds);
  std::printf("reclaim->replacement histogram: count %.0f sum %.3f s\n",
              op.metric("swarm_operator_reclaim_to_replacement_seconds_count"),
              op.metric("swarm_operator_reclaim_to_replacement_seconds_sum"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // progress visible when redirected
  const std::string mode = argc > 1 ? argv[1] : "reclaim";
  try {
    if (mode == "reclaim") return bench_reclaim(argc > 2 ? std::stoi(argv[2]) : 50);
    if (mode == "scale")
      return bench_scale(argc > 2 ? std::stoi(argv[2]) : 50, argc > 3 ? std::stoi(argv[3]) : 64,
                         argc > 4 ? std::stoi(argv[4]) : 60);
  } catch (const std::exception& e) {
    std::cerr << "operator_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: operator_bench reclaim [N] | scale [JOBS] [WORKERS] [SECONDS]\n";
  return 2;
}
