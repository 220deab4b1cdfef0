// TestEnv: a real control plane for the operator's integration tests. etcd, kube-apiserver and
// kube-scheduler (binaries from scripts/k8s/build-testenv.sh, built once and cached) run on
// loopback ports of their own in a temporary folder; the CRD is applied with the real kubectl.
// There is no kubelet: FakeKubelet plays its part for pods bound to the test's Node objects
// (Running + Ready, and finishing graceful deletions). Every process started here dies with the
// test process (PR_SET_PDEATHSIG) and is stopped by the destructor.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "operator/kube/client.h"

namespace swarm::optest {

using json = nlohmann::json;

struct Process {
  pid_t pid = -1;
  std::string log;
  bool alive() const;
  void signal(int sig) const;
  // SIGTERM, then SIGKILL after `grace`; reaps it.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
};

Process spawn(const std::vector<std::string>& argv, const std::string& log_path);
int free_port();
std::string read_text(const std::string& path);
std::string tail(const std::string& text, size_t lines);
// Runs a shell command; returns its exit status and puts stdout+stderr in *out.
int run_command(const std::string& cmd, std::string* out = nullptr);
// Polls `pred` every 20 ms until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

class TestEnv {
 public:
  // Starts everything; throws with the logs' tails on failure. extra_apiserver_args go to
  // kube-apiserver as given.
  explicit TestEnv(const std::vector<std::string>& extra_apiserver_args = {});
  ~TestEnv();

  const std::string& dir() const { return dir_; }
  std::string kubeconfig() const { return dir_ + "/kubeconfig"; }
  kube::Client& client() { return *client_; }
  // kubectl with this env's kubeconfig; returns the exit status, output in *out.
  int kubectl(const std::string& args, std::string* out = nullptr);
  int apply_yaml(const std::string& yaml, std::string* out = nullptr);

  // A Node with capacity (cpu 64, memory 256Gi, pods 110, nvidia.com/gpu 8), Ready, and labels.
  void create_node(const std::string& name, const std::map<std::string, std::string>& labels,
                   const json& taints = json::array());
  void add_taint(const std::string& node, const std::string& key, const std::string& effect = "NoSchedule");
  void set_node_ready(const std::string& node, bool ready);
  void delete_node(const std::string& node);

  std::vector<json> pods(const std::string& selector = "app.kubernetes.io/managed-by=swarm-operator");
  json get_job(const std::string& name);

  // The operator program, with this env's kubeconfig and a metrics port of its own.
  struct Operator {
    Process proc;
    int metrics_port = 0;
    std::string metrics() const;  // GET /metrics ("" when unreachable)
    double metric(const std::string& series) const;  // value of an exact series line, -1 if absent
  };
  Operator start_operator(const std::vector<std::string>& extra_args = {}, const std::string& tag = "op");

  // Stops and restarts kube-apiserver (same etcd): watches break, resourceVersions go stale.
  void restart_apiserver();

  void start_fake_kubelet();
  void stop_fake_kubelet();

  std::string logs_tail() const;

 private:
  void start_apiserver();
  void wait_ready();

  std::string dir_, bin_, kubectl_ = "kubectl";
  int api_port_ = 0, etcd_port_ = 0, peer_port_ = 0;
  std::vector<std::string> etcd_args_, apiserver_args_, scheduler_args_;
  Process etcd_, apiserver_, scheduler_;
  std::unique_ptr<kube::Client> client_;
  std::vector<pid_t> operator_pids_;
  std::atomic<bool> kubelet_stop_{false};
  std::thread kubelet_;
  int op_count_ = 0;
};

}  // namespace swarm::optest
