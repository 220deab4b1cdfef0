// swarm-operator: the SwarmJob controller. Wiring only: configuration, the API client, metrics,
// leader election and the controller; the decisions live in operator/controller/.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <random>
#include <thread>

#include "operator/controller/controller.h"
#include "operator/kube/config.h"
#include "operator/kube/leader_election.h"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

std::string default_identity() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return std::string(host) + "_" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 100000);
}

// The command line.
struct Flags {
  std::string kubeconfig, context, watch_ns, metrics_bind = "0.0.0.0:8080", log_level = "info";
  std::string lease_ns, lease_name = "swarm-operator", identity = default_identity();
  bool leader_elect = true;
  double lease_s = 15, renew_s = 10, retry_s = 2, resync_s = 300, qps = 50, burst = 100;
  int workers = 4;
  swarm::op::ProgressPollerOptions progress;
  bool network_policies = false, kueue = false;
  std::string monitoring_ns = "monitoring", operator_ns, kueue_default_queue;
};

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--kubeconfig", f.kubeconfig, "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", f.context, "kubeconfig context (default: current)");
  app.add_option("--namespace", f.watch_ns, "watch only this namespace (default: all)");
  app.add_option("--metrics-bind", f.metrics_bind, "host:port of /metrics and /healthz; port 0 = off")->capture_default_str();
  app.add_option("--workers", f.workers, "concurrent reconciles")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--resync-seconds", f.resync_s, "reconcile every job at least this often")->capture_default_str();
  app.add_option("--qps", f.qps, "API requests per second (client-side limit)")->capture_default_str();
  app.add_option("--burst", f.burst, "API request burst")->capture_default_str();
  app.add_flag("--leader-elect,!--no-leader-elect", f.leader_elect, "elect one active replica through a Lease")->capture_default_str();
  app.add_option("--lease-namespace", f.lease_ns, "namespace of the Lease (default: the kubeconfig's)");
  app.add_option("--lease-name", f.lease_name, "name of the Lease")->capture_default_str();
  app.add_option("--lease-duration", f.lease_s, "seconds a Lease holds without renewal")->capture_default_str();
  app.add_option("--renew-deadline", f.renew_s, "seconds the leader may fail to renew before stepping down")->capture_default_str();
  app.add_option("--retry-period", f.retry_s, "seconds between Lease attempts")->capture_default_str();
  app.add_option("--identity", f.identity, "this replica's name in the Lease")->capture_default_str();
  app.add_option("--progress-period", f.progress.period_seconds,
                 "seconds between reads of each running job's registry (step, samples/s); 0 = off")->capture_default_str();
  app.add_option("--progress-timeout", f.progress.timeout_seconds, "timeout of one registry request, seconds")
      ->capture_default_str();
  app.add_option("--progress-window", f.progress.window_seconds, "samples/s is the step advance over this many seconds")
      ->capture_default_str();
  app.add_option("--registry-url-template", f.progress.url_template,
                 "registry URL of a job ({job}, {namespace}); the annotation swarm-operator.io/registry-url overrides it")
      ->capture_default_str();
  app.add_flag("--network-policies", f.network_policies,
               "give each job a NetworkPolicy: ingress only from its own pods, the monitoring namespace and the "
               "operator's namespace");
  app.add_option("--monitoring-namespace", f.monitoring_ns,
                 "namespace whose pods may scrape jobs' metrics (with --network-policies; \"\" = none)")
      ->capture_default_str();
  app.add_option("--operator-namespace", f.operator_ns,
                 "namespace the operator runs in, allowed to read jobs' registries (with --network-policies; "
                 "default: the --lease-namespace)");
  app.add_flag("--kueue", f.kueue,
               "run SwarmJobs labelled kueue.x-k8s.io/queue-name through Kueue (v1beta2 Workloads the operator "
               "owns): suspended until admitted, pods only inside the admission, drained before an eviction gives "
               "the quota back; without it the label is ignored");
  app.add_option("--kueue-default-queue", f.kueue_default_queue,
                 "with --kueue: the LocalQueue of SwarmJobs without the label (\"\" = those run unqueued)");
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
}

// Leads (through a Lease when leader election is on) until a signal or the lease is lost; returns
// the exit code.
int lead_until_stopped(const Flags& f, swarm::kube::Client& client, swarm::op::OperatorMetrics& metrics,
                       swarm::op::Controller& controller) {
  std::atomic<bool> lost{false};
  std::unique_ptr<swarm::kube::LeaderElector> elector;
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); };
  if (f.leader_elect) {
    swarm::kube::LeaderElectionOptions lo{f.lease_ns, f.lease_name, f.identity, ms(f.lease_s), ms(f.renew_s), ms(f.retry_s)};
    elector = std::make_unique<swarm::kube::LeaderElector>(
        client, lo,
        [&] {
          metrics.set_leader(true);
          controller.wait_synced(std::chrono::seconds(60));
          controller.lead();
        },
        [&] {
          metrics.set_leader(false);
          lost = true;
        });
    elector->start();
  } else {
    metrics.set_leader(true);
    controller.wait_synced(std::chrono::seconds(60));
    controller.lead();
  }
  while (!g_stop && !lost) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("swarm-operator {}: {}", f.identity, lost ? "lost the lease, exiting" : "stopping");
  controller.stop();
  if (elector) elector->stop();  // releases the Lease: the standby takes over at once
  return lost ? 1 : 0;
}

// The API client, metrics, Events and the controller, then leading; throws on a setup error.
int run(Flags f) {
  auto cfg = swarm::kube::load_default(f.kubeconfig, f.context);
  if (f.lease_ns.empty()) f.lease_ns = cfg.namespace_;
  swarm::kube::ClientOptions copts;
  copts.qps = f.qps;
  copts.burst = f.burst;
  swarm::kube::Client client(cfg, copts);
  swarm::op::OperatorMetrics metrics;
  client.on_request = [&metrics](const std::string& verb, int) { metrics.add_api_request(verb); };
  const auto colon = f.metrics_bind.rfind(':');
  metrics.serve(f.metrics_bind.substr(0, colon), std::stoi(f.metrics_bind.substr(colon + 1)));
  swarm::kube::EventRecorder events(client, "swarm-operator", f.identity);
  swarm::op::ControllerOptions options;
  options.namespace_ = f.watch_ns;
  options.workers = f.workers;
  options.resync_seconds = f.resync_s;
  options.progress = f.progress;
  options.network_policies = f.network_policies;
  options.kueue = f.kueue;
  options.kueue_default_queue = f.kueue_default_queue;
  options.network_policy.monitoring_namespace = f.monitoring_ns;
  options.network_policy.operator_namespace = f.operator_ns.empty() ? f.lease_ns : f.operator_ns;
  swarm::op::Controller controller(client, events, metrics, options);
  controller.start();
  spdlog::info("swarm-operator {}: watching {} on {}", f.identity, f.watch_ns.empty() ? "all namespaces" : f.watch_ns,
               cfg.server);
  return lead_until_stopped(f, client, metrics, controller);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"swarm-operator: runs SwarmJobs (SWARM parallelism training) on Kubernetes"};
  Flags flags;
  add_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  try {
    return run(flags);
  } catch (const std::exception& e) {
    spdlog::error("swarm-operator: {}", e.what());
    return 1;
  }
}
