// operator_bench: figures for docs/operator.md, no assertions.
//   operator_bench reclaim [N=50]   N sequential reclaim notices (GKE termination taint); for each,
//                                   seconds from the taint write to the replacement pod's ADDED
//                                   event on a watch; prints attempts, failures (no ready worker
//                                   left on an untainted node) and timeouts (no replacement in
//                                   10 s, counted at 10 s) beside p50/p99/max (below 100 samples
//                                   the p99 is the max and printed as such).
//   operator_bench mass-loss [RUNS=3]
//                                   examples/multi-region-spot.yaml's shape on 7 two-GPU nodes (3 spot
//                                   us, 3 spot eu, 1 on-demand): a Karpenter taint on one us node,
//                                   then the other two us nodes and one eu node deleted at once.
//                                   Prints stage-unserved seconds (summed over stages: no ready
//                                   worker / no scheduled worker), seconds until all 6 are ready,
//                                   replacement created -> bound p50/p99.
//   operator_bench autoscaled       the same with spot-us autoscaled: all its nodes deleted, one
//                                   added 30 s later; seconds any stage spent below minPerStage.
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
#include <string>

#include "operator/kube/config.h"

#include "operator/kube/informer.h"
#include "tests/operator/capacity_fixture.h"

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

// "p50 A  p99 B  max C", or "p50 A  max C" below 100 samples (where a p99 is only the max).
std::string tail_latencies(const std::vector<double>& v) {
  char buf[160];
  if (v.size() < 100)
    std::snprintf(buf, sizeof buf, "p50 %.3f s  max %.3f s (n=%zu: below 100 samples p99 is the max)", percentile(v, 0.5),
                  percentile(v, 1.0), v.size());
  else
    std::snprintf(buf, sizeof buf, "p50 %.3f s  p99 %.3f s  max %.3f s (n=%zu)", percentile(v, 0.5), percentile(v, 0.99),
                  percentile(v, 1.0), v.size());
  return buf;
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
                                   "  checkpoint: {path: /checkpoints}\n"
                                   "  nodePools:\n  - {name: spot, preemptible: true}\n"));
  if (!wait_until([&] { return count_ready(live_workers(env, "bench")) == 10; }, 60s)) {
    std::cerr << "job did not become ready\n";
    return 1;
  }
  constexpr double kLimitSeconds = 10;
  std::vector<double> lat;
  int failures = 0, timeouts = 0, unsettled = 0;
  std::set<std::string> tainted;
  for (int i = 0; i < n; ++i) {
    auto ws = live_workers(env, "bench");
    std::string node;
    for (const auto& p : ws)
      if (count_ready({p}) && !tainted.count(p["spec"].value("nodeName", ""))) node = p["spec"].value("nodeName", "");
    if (node.empty()) {  // nothing left to reclaim: this attempt and every later one fail
      std::cerr << "reclaim " << i << ": no ready worker on an untainted node\n";
      failures += n - i;
      break;
    }
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
        }, std::chrono::milliseconds(static_cast<int>(kLimitSeconds * 1000)))) {
      std::cerr << "reclaim " << i << ": TIMED OUT, no replacement within " << kLimitSeconds << " s\n";
      ++timeouts;
      lat.push_back(kLimitSeconds);  // it took at least this long: in the percentiles, not skipped
    } else {
      lat.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    if (!wait_until([&] { return count_ready(live_workers(env, "bench")) == 10; }, 20s)) ++unsettled;
  }
  pods.stop();
  std::printf("reclaims: attempts %d, failures %d, timeouts %d (counted at %.0f s), not settled in 20 s after %d\n", n,
              failures, timeouts, kLimitSeconds, unsettled);
  std::printf("notice->replacement created: %s\n", tail_latencies(lat).c_str());
  std::printf("operator histogram swarm_operator_reclaim_to_replacement_seconds: count %.0f sum %.3f\n",
              op.metric("swarm_operator_reclaim_to_replacement_seconds_count"),
              op.metric("swarm_operator_reclaim_to_replacement_seconds_sum"));
  return 0;
}

// Worker pods' ADDED and first-bound times, from a watch of our own.
struct BindWatch {
  explicit BindWatch(TestEnv& env)
      : client(swarm::kube::load_kubeconfig(env.kubeconfig()), {1000, 1000}),
        pods(client, {"v1", "pods", "default", "swarm-operator.io/role=worker"}) {
    pods.add_handler([this](swarm::kube::EventType t, const json& o, const json*) {
      const std::string uid = o["metadata"].value("uid", "");
      std::lock_guard<std::mutex> lock(mu);
      if (t == swarm::kube::EventType::Added) added.emplace(uid, Clock::now());
      if (t != swarm::kube::EventType::Deleted && !o["spec"].value("nodeName", "").empty()) bound.emplace(uid, Clock::now());
    });
    pods.start();
    pods.wait_synced(10s);
  }
  ~BindWatch() { pods.stop(); }
  // created -> bound seconds of pods ADDED after t0.
  std::vector<double> latencies(Clock::time_point t0) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<double> out;
    for (const auto& [uid, t] : added) {
      if (t < t0) continue;
      auto b = bound.find(uid);
      if (b != bound.end()) out.push_back(std::chrono::duration<double>(b->second - t).count());
    }
    return out;
  }
  swarm::kube::Client client;
  swarm::kube::Informer pods;
  std::mutex mu;
  std::map<std::string, Clock::time_point> added, bound;
};

int bench_mass_loss(int runs) {
  std::vector<double> unserved, unscheduled, all_ready, lat;
  for (int run = 0; run < runs; ++run) {
    TestEnv env;
    env.start_fake_kubelet();
    create_seven_nodes(env);
    auto op = env.start_operator({"--log-level", "info"});
    BindWatch watch(env);
    env.apply_yaml(job_yaml("spot-lm", gpu_spec(3, 2, 3, 4, "  placement: {unschedulableSeconds: 60}\n")));
    if (!wait_until([&] { return count_ready(live_workers(env, "spot-lm")) == 6; }, 90s)) {
      std::cerr << "job did not become ready\n";
      return 1;
    }
    std::map<std::string, int> per_node;
    for (const char* n : {"us-0", "us-1", "us-2"}) per_node[n] = 0;
    for (const auto& p : live_workers(env, "spot-lm"))
      if (per_node.count(node_of(p))) ++per_node[node_of(p)];  // us nodes only
    std::string tainted = "us-0";
    for (const auto& [n, c] : per_node)
      if (c < per_node[tainted]) tainted = n;
    env.add_taint(tainted, "karpenter.sh/disrupted");
    wait_until([&] {
      auto ws = live_workers(env, "spot-lm");
      if (ws.size() != 6 || count_ready(ws) != 6) return false;
      for (const auto& p : ws)
        if (node_of(p) == tainted) return false;
      return true;
    }, 90s);
    std::map<std::string, int> eu;
    for (const auto& p : live_workers(env, "spot-lm"))
      if (pool_of(p) == "spot-eu") ++eu[node_of(p)];
    std::string eu_victim = "eu-0";
    for (const auto& [n, c] : eu)
      if (c > eu[eu_victim]) eu_victim = n;
    std::vector<std::string> victims = {eu_victim};
    for (const char* n : {"us-0", "us-1", "us-2"})
      if (n != tainted) victims.push_back(n);
    StageMonitor monitor(env, "spot-lm", 3);
    std::this_thread::sleep_for(300ms);
    monitor.reset();
    const auto t0 = Clock::now();
    for (const auto& n : victims) env.delete_node(n);
    const std::set<std::string> gone(victims.begin(), victims.end());
    const bool ok = wait_until([&] { return ready_off(env, "spot-lm", 6, gone); }, 180s);
    const double ready_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::this_thread::sleep_for(500ms);
    monitor.stop();
    auto l = watch.latencies(t0);
    lat.insert(lat.end(), l.begin(), l.end());
    unserved.push_back(monitor.under_seconds());
    unscheduled.push_back(monitor.unscheduled_seconds());
    all_ready.push_back(ready_s);
    std::map<std::string, int> pools;
    for (const auto& p : live_workers(env, "spot-lm")) ++pools[pool_of(p)];
    std::printf("run %d: deleted %s %s %s (tainted %s): %s after %.2f s; stage-unserved %.2f s (no ready worker), "
                "%.2f s (no scheduled worker); %zu replacement(s) created->bound; pools now:",
                run + 1, victims[0].c_str(), victims[1].c_str(), victims[2].c_str(), tainted.c_str(),
                ok ? "all 6 ready" : "NOT all ready", ready_s, monitor.under_seconds(), monitor.unscheduled_seconds(),
                l.size());
    for (const auto& [pool, n] : pools) std::printf(" %s=%d", pool.c_str(), n);
    std::printf("\n");
  }
  std::printf("mass loss, %d run(s): stage-unserved (no ready worker) median %.2f s max %.2f s; (no scheduled worker) "
              "median %.2f s max %.2f s; all ready median %.2f s; created->bound p50 %.3f s p99 %.3f s (%zu pods)\n",
              runs, percentile(unserved, 0.5), percentile(unserved, 1.0), percentile(unscheduled, 0.5),
              percentile(unscheduled, 1.0), percentile(all_ready, 0.5), percentile(lat, 0.5), percentile(lat, 0.99),
              lat.size());
  return 0;
}

int bench_autoscaled() {
  TestEnv env;
  env.start_fake_kubelet();
  create_seven_nodes(env);
  auto op = env.start_operator({"--log-level", "info"});
  BindWatch watch(env);
  env.apply_yaml(job_yaml("spot-lm", gpu_spec(3, 2, 3, 4, "  placement: {unschedulableSeconds: 120}\n",
                                              "    autoscaled: true\n")));
  if (!wait_until([&] { return count_ready(live_workers(env, "spot-lm")) == 6; }, 90s)) {
    std::cerr << "job did not become ready\n";
    return 1;
  }
  StageMonitor monitor(env, "spot-lm", 3);  // minPerStage 1
  std::this_thread::sleep_for(300ms);
  monitor.reset();
  const auto t0 = Clock::now();
  for (const char* n : {"us-0", "us-1", "us-2"}) env.delete_node(n);
  wait_until([&] {
    auto ws = live_workers(env, "spot-lm");
    std::map<std::string, int> ready;
    for (const auto& p : ws) {
      const std::string node = node_of(p);
      if (node == "us-0" || node == "us-1" || node == "us-2") return false;  // not acted on yet
      ready[label(p, "swarm-operator.io/stage")] += is_ready(p);
    }
    return ready["0"] >= 1 && ready["1"] >= 1 && ready["2"] >= 1;
  }, 60s);
  std::this_thread::sleep_for(1s);  // the monitor's samples in flight land
  const double first = monitor.under_seconds();
  std::this_thread::sleep_for(29s);
  spot_node(env, "us-3", "us-central1", "us-central1-a");
  spot_node(env, "us-4", "us-central1", "us-central1-b");
  const bool back = wait_until([&] {
    auto ws = live_workers(env, "spot-lm");
    int us = 0;
    for (const auto& p : ws) us += pool_of(p) == "spot-us" && is_ready(p);
    return us == 4 && ws.size() == 6 && count_ready(ws) == 6;
  }, 120s);
  const double back_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(500ms);
  monitor.stop();
  std::vector<double> surge, waited;  // bound at once (surge workers) / after the new nodes came
  for (double x : watch.latencies(t0)) (x < 10 ? surge : waited).push_back(x);
  std::printf("autoscaled spot-us: all 3 of its nodes deleted, 2 new ones 30 s later: stages below minPerStage "
              "%.2f s right after the loss (summed; %.2f s without a scheduled worker in all), %.2f s during the 30 s "
              "wait and the surge's retirement; %s at %.1f s; surge workers created->bound p50 %.3f s max %.3f s "
              "(%zu); replacements that waited for the new nodes: created->bound p50 %.1f s (%zu)\n",
              first, monitor.unscheduled_seconds(), monitor.under_seconds() - first,
              back ? "4 workers back in spot-us" : "NOT back in spot-us", back_s, percentile(surge, 0.5),
              percentile(surge, 1.0), surge.size(), percentile(waited, 0.5), waited.size());
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
                                                      "}\n  checkpoint: {path: /checkpoints}\n  nodePools:\n  - {name: spot, preemptible: true}\n") + "---\n";
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
    if (mode == "mass-loss") return bench_mass_loss(argc > 2 ? std::stoi(argv[2]) : 3);
    if (mode == "autoscaled") return bench_autoscaled();
    if (mode == "scale")
      return bench_scale(argc > 2 ? std::stoi(argv[2]) : 50, argc > 3 ? std::stoi(argv[3]) : 64,
                         argc > 4 ? std::stoi(argv[4]) : 60);
  } catch (const std::exception& e) {
    std::cerr << "operator_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: operator_bench reclaim [N] | mass-loss [RUNS] | autoscaled | scale [JOBS] [WORKERS] [SECONDS]\n";
  return 2;
}
