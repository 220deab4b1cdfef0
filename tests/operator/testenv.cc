#include "tests/operator/testenv.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/subprocess.h"
#include "operator/kube/config.h"
#include "operator/kube/time_format.h"
#include "common/ports.h"

namespace swarm::optest {

bool Process::alive() const { return pid > 0 && ::kill(pid, 0) == 0 && waitpid(pid, nullptr, WNOHANG) == 0; }

void Process::signal(int sig) const {
  if (pid > 0) subprocess::signal(pid, sig);
}

void Process::stop(std::chrono::milliseconds grace) {
  if (pid <= 0) return;
  subprocess::signal(pid, SIGTERM);
  if (!subprocess::reap_within(pid, grace.count() / 1000.0)) subprocess::kill_and_reap(pid, /*group=*/false);
  pid = -1;
}

Process spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  Process p;
  p.log = log_path;
  subprocess::SpawnOptions o;
  o.log_path = log_path;  // appended to
  // In the test's process group, with its stdin; SIGKILLed when the test process dies (the
  // default die_with_parent), so a crashed test leaves no control plane behind.
  o.own_group = false;
  o.null_stdin = false;
  p.pid = subprocess::spawn(argv.at(0), std::vector<std::string>(argv.begin() + 1, argv.end()), o);
  return p;
}

int free_port() { return runtime::pick_free_port("127.0.0.1"); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& text, size_t lines) {
  if (text.empty()) return text;
  size_t pos = text.size();
  for (size_t n = 0; n <= lines && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

int run_command(const std::string& cmd, std::string* out) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  int status = pclose(f);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      if (pred()) return true;
    } catch (const std::exception&) {
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

namespace {

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

TestEnv::TestEnv(const std::vector<std::string>& extra_apiserver_args) {
  char tmpl[] = "/tmp/swarm-optest-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  api_port_ = free_port();
  etcd_port_ = free_port();
  peer_port_ = free_port();
  const std::string script = std::string(SWARM_SOURCE_DIR) + "/scripts/k8s/testenv.sh";
  std::string out;
  if (run_command(script + " prepare " + dir_ + " " + std::to_string(api_port_) + " 2>/dev/null", &out) != 0)
    throw std::runtime_error("testenv.sh prepare failed:\n" + tail(out, 40));
  bin_ = tail(out, 1);
  while (!bin_.empty() && (bin_.back() == '\n' || bin_.back() == ' ')) bin_.pop_back();
  kubectl_ = (run_command("command -v kubectl") == 0) ? "kubectl" : bin_ + "/kubectl";
  if (run_command(script + " args " + dir_ + " " + std::to_string(api_port_) + " " + std::to_string(etcd_port_) +
                      " " + std::to_string(peer_port_) + " 2>/dev/null | tail -n 3",
                  &out) != 0)
    throw std::runtime_error("testenv.sh args failed:\n" + out);
  std::istringstream lines(out);
  std::string l1, l2, l3;
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  etcd_args_ = split_words(l1);
  apiserver_args_ = split_words(l2);
  scheduler_args_ = split_words(l3);
  apiserver_args_.insert(apiserver_args_.end(), extra_apiserver_args.begin(), extra_apiserver_args.end());
  etcd_ = spawn(etcd_args_, dir_ + "/etcd.log");
  start_apiserver();
  client_ = std::make_unique<kube::Client>(kube::load_kubeconfig(kubeconfig()), kube::ClientOptions{1000, 1000});
  wait_ready();
  scheduler_ = spawn(scheduler_args_, dir_ + "/kube-scheduler.log");
  std::string crd_out;
  if (kubectl("apply -f " + std::string(SWARM_SOURCE_DIR) + "/crds/", &crd_out) != 0)
    throw std::runtime_error("applying the CRD failed:\n" + crd_out);
  // kubectl wait fails at once ("accessor error: <nil>") when it reads the CRD before the API
  // server gave it any status, as happens on a loaded machine: try again then.
  bool established = false;
  for (int attempt = 0; attempt < 10 && !established; ++attempt) {
    established = kubectl("wait --for condition=established --timeout=60s crd/swarmjobs.swarm-operator.io", &crd_out) == 0;
    if (!established && crd_out.find("accessor error") == std::string::npos) break;
    if (!established) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!established) throw std::runtime_error("the CRD did not become established:\n" + crd_out);
}

TestEnv::~TestEnv() {
  stop_fake_kubelet();
  for (pid_t pid : operator_pids_) subprocess::kill_and_reap(pid, /*group=*/false);
  scheduler_.stop();
  apiserver_.stop();
  etcd_.stop();
  if (!std::getenv("SWARM_KEEP_TESTENV")) run_command("rm -rf " + dir_);
}

void TestEnv::start_apiserver() { apiserver_ = spawn(apiserver_args_, dir_ + "/kube-apiserver.log"); }

void TestEnv::wait_ready() {
  const bool ok = wait_until([&] {
    auto r = client_->get("/api/v1/namespaces/default");
    (void)r;
    return true;
  }, std::chrono::seconds(90));
  if (!ok) throw std::runtime_error("kube-apiserver not ready:\n" + logs_tail());
}

void TestEnv::restart_apiserver() {
  apiserver_.stop(std::chrono::milliseconds(5000));
  start_apiserver();
  wait_ready();
}

std::string TestEnv::logs_tail() const {
  std::string s;
  for (const char* n : {"etcd", "kube-apiserver", "kube-scheduler"})
    s += std::string("--- ") + n + "\n" + tail(read_text(dir_ + "/" + n + ".log"), 15);
  return s;
}

int TestEnv::kubectl(const std::string& args, std::string* out) {
  return run_command(kubectl_ + " --kubeconfig " + kubeconfig() + " " + args, out);
}

int TestEnv::apply_yaml(const std::string& yaml, std::string* out) {
  const std::string path = dir_ + "/manifest-" + std::to_string(std::rand()) + ".yaml";
  std::ofstream(path) << yaml;
  return kubectl("apply -f " + path, out);
}

void TestEnv::create_node(const std::string& name, const std::map<std::string, std::string>& labels,
                          const json& taints) {
  json l = {{"kubernetes.io/hostname", name}};
  for (const auto& [k, v] : labels) l[k] = v;
  json capacity = {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"labels", l}}},
               {"spec", {{"taints", taints}}},
               {"status",
                {{"capacity", capacity},
                 {"allocatable", capacity},
                 {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"},
                                              {"lastHeartbeatTime", kube::format_time(std::chrono::system_clock::now())}}})}}}};
  client_->create("/api/v1/nodes", node);
  // Status on create is not always kept: set it through /status as a kubelet would.
  client_->patch("/api/v1/nodes/" + name + "/status", {{"status", node["status"]}}, kube::PatchType::StrategicMerge);
}

void TestEnv::add_taint(const std::string& node, const std::string& key, const std::string& effect) {
  json n = client_->get("/api/v1/nodes/" + node);
  json taints = n["spec"].value("taints", json::array());
  taints.push_back({{"key", key}, {"effect", effect}});
  client_->patch("/api/v1/nodes/" + node, {{"spec", {{"taints", taints}}}});
}

void TestEnv::set_node_ready(const std::string& node, bool ready) {
  json cond = {{"type", "Ready"}, {"status", ready ? "True" : "False"}, {"reason", ready ? "KubeletReady" : "NodeStatusUnknown"},
               {"lastHeartbeatTime", kube::format_time(std::chrono::system_clock::now())}};
  client_->patch("/api/v1/nodes/" + node + "/status", {{"status", {{"conditions", json::array({cond})}}}},
                 kube::PatchType::StrategicMerge);
}

void TestEnv::delete_node(const std::string& node) { client_->remove("/api/v1/nodes/" + node, 0); }

std::vector<json> TestEnv::pods(const std::string& selector) {
  json list = client_->get("/api/v1/pods?labelSelector=" + kube::url_encode(selector));
  return list["items"].get<std::vector<json>>();
}

json TestEnv::get_job(const std::string& name) {
  return client_->get("/apis/swarm-operator.io/v1alpha1/namespaces/default/swarmjobs/" + name);
}

std::string TestEnv::Operator::metrics() const {
  // A plain HTTP/1.0 GET: no curl needed.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(metrics_port));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[8192];
      ssize_t n;
      size_t want = std::string::npos;  // header end + Content-Length, once known
      while (out.size() < want && (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        out.append(buf, static_cast<size_t>(n));
        const auto end = out.find("\r\n\r\n");
        if (want == std::string::npos && end != std::string::npos) {
          std::string head = out.substr(0, end);
          for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          const auto cl = head.find("content-length:");
          if (cl != std::string::npos) want = end + 4 + std::stoul(head.substr(cl + 15));
        }
      }
    }
  }
  close(fd);
  const auto body = out.find("\r\n\r\n");
  if (out.rfind("HTTP/1.", 0) != 0 || out.find(" 200 ") > 12 || body == std::string::npos) return "";
  return out.substr(body + 4);
}

double TestEnv::Operator::metric(const std::string& series) const {
  std::istringstream in(metrics());
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TestEnv::Operator TestEnv::start_operator(const std::vector<std::string>& extra, const std::string& tag) {
  Operator op;
  op.metrics_port = free_port();
  std::vector<std::string> argv = {std::string(SWARM_BINARY_DIR) + "/bin/swarm-operator", "--kubeconfig", kubeconfig(),
                                   "--metrics-bind", "127.0.0.1:" + std::to_string(op.metrics_port),
                                   "--identity", tag + "-" + std::to_string(++op_count_)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  // Test defaults (short leases: hand-over tests stay quick; no registry polling, since job
  // registries are pods that never run here), unless the caller set them.
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--lease-duration", "4"}, {"--renew-deadline", "3"}, {"--retry-period", "0.5"}, {"--log-level", "debug"},
           {"--progress-period", "0"}}) {
    if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
      argv.push_back(flag);
      argv.push_back(value);
    }
  }
  op.proc = spawn(argv, dir_ + "/" + tag + "-" + std::to_string(op_count_) + ".log");
  operator_pids_.push_back(op.proc.pid);
  return op;
}

void TestEnv::start_fake_kubelet() {
  kubelet_stop_ = false;
  kubelet_ = std::thread([this] {
    while (!kubelet_stop_) {
      try {
        for (const auto& p : pods()) {
          const std::string name = p["metadata"]["name"], ns = p["metadata"]["namespace"];
          const std::string node = p["spec"].value("nodeName", "");
          if (node.empty()) continue;
          const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
          if (p["metadata"].contains("deletionTimestamp")) {
            // The container exits promptly on SIGTERM: finish the deletion after a moment.
            double since = kube::to_seconds(p["metadata"].value("deletionTimestamp", "")) -
                           p["metadata"].value("deletionGracePeriodSeconds", 0);
            if (kube::to_seconds(std::chrono::system_clock::now()) - since > 1.0) client_->remove(path, 0);
            continue;
          }
          // Running already, or ended (a test wrote Succeeded/Failed: the container exited).
          const std::string phase = p["status"].value("phase", "");
          if (phase == "Running" || phase == "Succeeded" || phase == "Failed") continue;
          auto n = client_->get_if_exists("/api/v1/nodes/" + node);
          if (!n) continue;
          const std::string now = kube::format_time(std::chrono::system_clock::now());
          json status = {{"phase", "Running"},
                         {"podIP", "10.244.0." + std::to_string(1 + std::rand() % 250)},
                         {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", now}},
                                                     {{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", now}}})}};
          client_->patch(path + "/status", {{"status", status}}, kube::PatchType::StrategicMerge);
        }
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

void TestEnv::stop_fake_kubelet() {
  kubelet_stop_ = true;
  if (kubelet_.joinable()) kubelet_.join();
}

}  // namespace swarm::optest
