// swarm-operator: the SwarmJob controller. Wiring only: configuration, the API client, metrics,
// leader election and the controller; the decisions live in operator/controller/.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"swarm-operator: runs SwarmJobs (SWARM parallelism training) on Kubernetes"};
  std::string kubeconfig, context, watch_ns, metrics_bind = "0.0.0.0:8080", log_level = "info";
  std::string lease_ns, lease_name = "swarm-operator", identity = default_identity();
  bool leader_elect = true;
  double lease_s = 15, renew_s = 10, retry_s = 2, resync_s = 300, qps = 50, burst = 100;
  int workers = 4;
  swarm::op::ProgressPollerOptions progress;
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", context, "kubeconfig context (default: current)");
  app.add_option("--namespace", watch_ns, "watch only this namespace (default: all)");
  app.add_option("--metrics-bind", metrics_bind, "host:port of /metrics and /healthz; port 0 = off")->capture_default_str();
  app.add_option("--workers", workers, "concurrent reconciles")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--resync-seconds", resync_s, "reconcile every job at least this often")->capture_default_str();
  app.add_option("--qps", qps, "API requests per second (client-side limit)")->capture_default_str();
  app.add_option("--burst", burst, "API request burst")->capture_default_str();
  app.add_flag("--leader-elect,!--no-leader-elect", leader_elect, "elect one active replica through a Lease")->capture_default_str();
  app.add_option("--lease-namespace", lease_ns, "namespace of the Lease (default: the kubeconfig's)");
  app.add_option("--lease-name", lease_name, "name of the Lease")->capture_default_str();
  app.add_option("--lease-duration", lease_s, "seconds a Lease holds without renewal")->capture_default_str();
  app.add_option("--renew-deadline", renew_s, "seconds the leader may fail to renew before stepping down")->capture_default_str();
  app.add_option("--retry-period", retry_s, "seconds between Lease attempts")->capture_default_str();
  app.add_option("--identity", identity, "this replica's name in the Lease")->capture_default_str();
  app.add_option("--progress-period", progress.period_seconds,
                 "seconds between reads of each running job's registry (step, samples/s); 0 = off")->capture_default_str();
  app.add_option("--progress-timeout", progress.timeout_seconds, "timeout of one registry request, seconds")
      ->capture_default_str();
  app.add_option("--progress-window", progress.window_seconds, "samples/s is the step advance over this many seconds")
      ->capture_default_str();
  app.add_option("--registry-url-template", progress.url_template,
                 "registry URL of a job ({job}, {namespace}); the annotation swarm-operator.io/registry-url overrides it")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  try {
    auto cfg = swarm::kube::load_default(kubeconfig, context);
    if (lease_ns.empty()) lease_ns = cfg.namespace_;
    swarm::kube::ClientOptions copts;
    copts.qps = qps;
    copts.burst = burst;
    swarm::kube::Client client(cfg, copts);
    swarm::op::OperatorMetrics metrics;
    client.on_request = [&metrics](const std::string& verb, int) { metrics.add_api_request(verb); };
    const auto colon = metrics_bind.rfind(':');
    metrics.serve(metrics_bind.substr(0, colon), std::stoi(metrics_bind.substr(colon + 1)));
    swarm::kube::EventRecorder events(client, "swarm-operator", identity);
    swarm::op::ControllerOptions options;
    options.namespace_ = watch_ns;
    options.workers = workers;
    options.resync_seconds = resync_s;
    options.progress = progress;
    swarm::op::Controller controller(client, events, metrics, options);
    controller.start();
    spdlog::info("swarm-operator {}: watching {} on {}", identity, watch_ns.empty() ? "all namespaces" : watch_ns,
                 cfg.server);

    std::atomic<bool> lost{false};
    std::unique_ptr<swarm::kube::LeaderElector> elector;
    auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); };
    if (leader_elect) {
      swarm::kube::LeaderElectionOptions lo{lease_ns, lease_name, identity, ms(lease_s), ms(renew_s), ms(retry_s)};
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
    spdlog::info("swarm-operator {}: {}", identity, lost ? "lost the lease, exiting" : "stopping");
    controller.stop();
    if (elector) elector->stop();  // releases the Lease: the standby takes over at once
    return lost ? 1 : 0;
  } catch (const std::exception& e) {
    spdlog::error("swarm-operator: {}", e.what());
    return 1;
  }
}
