#include "tests/operator/kueue_env.h"

#include "operator/kube/config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace swarm::optest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNamespace = "kueue-system";
constexpr const char* kService = "kueue-webhook-service";

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// kustomize's namePrefix and namespace, as the release applies them to the webhook's Service
// reference in config/.
void point_at_service(YAML::Node service) {
  service["namespace"] = kNamespace;
  service["name"] = kService;
}

bool for_kueue_group(const YAML::Node& webhook) {
  for (const auto& rule : webhook["rules"])
    for (const auto& g : rule["apiGroups"])
      if (g.as<std::string>() == "kueue.x-k8s.io") return true;
  return false;
}

}  // namespace

std::vector<std::string> kueue_apiserver_args() { return {"--enable-aggregator-routing=true"}; }

std::string host_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* a = list; a && out.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf))) out = buf;
  }
  freeifaddrs(list);
  return out;
}

KueueEnv::KueueEnv(TestEnv& env) : env_(env) {
  std::string out;
  if (run_command(std::string(SWARM_SOURCE_DIR) + "/scripts/k8s/build-kueue.sh 2>&1", &out) != 0)
    throw std::runtime_error("build-kueue.sh failed:\n" + tail(out, 30));
  root_ = trim(tail(out, 1));
  host_ = host_address();
  if (host_.empty()) throw std::runtime_error("no non-loopback IPv4 address to route Kueue's webhooks to");
  port_ = free_port();
  env_.client().create("/api/v1/namespaces", {{"metadata", {{"name", kNamespace}}}});
  // The Secret Kueue's certificate management fills in (config/components/internalcert, the
  // release's kueue-webhook-server-cert): it refuses to start without it.
  YAML::Node secret = YAML::LoadFile(root_ + "/config/internalcert/secret.yaml");
  env_.client().create(std::string("/api/v1/namespaces/") + kNamespace + "/secrets",
                       {{"apiVersion", "v1"}, {"kind", "Secret"},
                        {"metadata", {{"name", "kueue-" + secret["metadata"]["name"].as<std::string>()}}}});
  install_crds();
  install_webhooks();
  route_webhooks();
  start();
}

KueueEnv::~KueueEnv() { stop(); }

void KueueEnv::stop() { proc_.stop(std::chrono::milliseconds(5000)); }

std::string KueueEnv::log_tail(size_t lines) const { return tail(read_text(proc_.log), lines); }

void KueueEnv::install_crds() {
  std::string out;
  // create, not apply: the Workload CRD is larger than apply's last-applied annotation may be.
  if (env_.kubectl("create -f " + root_ + "/config/crd/", &out) != 0)
    throw std::runtime_error("creating Kueue's CRDs failed:\n" + tail(out, 20));
  // The conversion webhooks the release's kustomize patches in (not every file in crd/patches/).
  for (const auto& entry : YAML::LoadFile(root_ + "/config/crd-kustomization.yaml")["patches"]) {
    const fs::path file = root_ + "/config/crd/" + entry["path"].as<std::string>();
    YAML::Node patch = YAML::LoadFile(file.string());
    point_at_service(patch["spec"]["conversion"]["webhook"]["clientConfig"]["service"]);
    const std::string path = env_.dir() + "/" + file.filename().string();
    std::ofstream(path) << YAML::Dump(patch) << "\n";
    const std::string crd = patch["metadata"]["name"].as<std::string>();
    if (env_.kubectl("patch crd " + crd + " --type merge --patch-file " + path, &out) != 0)
      throw std::runtime_error("patching " + crd + " failed:\n" + tail(out, 20));
  }
  if (env_.kubectl("wait --for condition=established --timeout=60s crd --all", &out) != 0)
    throw std::runtime_error("Kueue's CRDs not established:\n" + tail(out, 20));
}

void KueueEnv::install_webhooks() {
  std::string all;
  for (YAML::Node doc : YAML::LoadAllFromFile(root_ + "/config/webhook/manifests.yaml")) {
    if (!doc || !doc["kind"]) continue;
    YAML::Node keep(YAML::NodeType::Sequence);
    for (YAML::Node wh : doc["webhooks"]) {
      if (!for_kueue_group(wh)) continue;
      point_at_service(wh["clientConfig"]["service"]);
      keep.push_back(wh);
    }
    doc["webhooks"] = keep;
    doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"].as<std::string>();
    all += "---\n" + YAML::Dump(doc) + "\n";
  }
  const std::string path = env_.dir() + "/kueue-webhooks.yaml";
  std::ofstream(path) << all;
  std::string out;
  if (env_.kubectl("create -f " + path, &out) != 0)
    throw std::runtime_error("creating Kueue's webhook configurations failed:\n" + tail(out, 20));
}

void KueueEnv::route_webhooks() {
  const std::string ns = std::string("/api/v1/namespaces/") + kNamespace;
  env_.client().create(ns + "/services",
                       {{"metadata", {{"name", kService}}},
                        {"spec", {{"ports", json::array({{{"name", "https"}, {"port", 443}, {"targetPort", port_}}})}}}});
  env_.client().create(std::string("/apis/discovery.k8s.io/v1/namespaces/") + kNamespace + "/endpointslices",
                       {{"metadata", {{"name", std::string(kService) + "-host"},
                                      {"labels", {{"kubernetes.io/service-name", kService}}}}},
                        {"addressType", "IPv4"},
                        {"endpoints", json::array({{{"addresses", json::array({host_})}, {"conditions", {{"ready", true}}}}})},
                        {"ports", json::array({{{"name", "https"}, {"port", port_}, {"protocol", "TCP"}}})}});
}

// What the kubelet does in a cluster: the Secret Kueue's certificate management fills is mounted
// at webhook.certDir (its rotator waits for the files there before the webhook server starts).
void KueueEnv::mount_certificates() {
  const std::string dir = env_.dir() + "/kueue-certs";
  if (fs::exists(dir + "/tls.crt")) return;
  const json secret =
      env_.client().get(std::string("/api/v1/namespaces/") + kNamespace + "/secrets/kueue-webhook-server-cert");
  const json data = secret.value("data", json::object());
  if (!data.contains("tls.crt") || !data.contains("tls.key")) return;
  fs::create_directories(dir);
  // The key first: tls.crt's presence is what the rotator waits for.
  for (const char* name : {"ca.crt", "ca.key", "tls.key", "tls.crt"}) {
    if (!data.contains(name)) continue;
    std::ofstream(dir + "/" + name + ".tmp", std::ios::binary) << kube::base64_decode(data[name].get<std::string>());
    fs::rename(dir + "/" + name + ".tmp", dir + "/" + name);
  }
}

void KueueEnv::start() {
  const std::string config = env_.dir() + "/kueue-config.yaml";
  std::ofstream(config) << "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                           "kind: Configuration\n"
                           "namespace: " << kNamespace << "\n"
                           "health: {healthProbeBindAddress: \"0\"}\n"
                           "metrics: {bindAddress: \"0\"}\n"
                           "webhook: {host: \"" << host_ << "\", port: " << port_ << ", certDir: \"" << env_.dir()
                        << "/kueue-certs\"}\n"
                           "leaderElection: {leaderElect: false}\n"
                           "internalCertManagement: {enable: true, webhookServiceName: " << kService
                        << ", webhookSecretName: kueue-webhook-server-cert}\n"
                           "featureGates: {VisibilityOnDemand: false}\n"
                           "integrations:\n"
                           "  frameworks: [batch/job]\n"
                           "  externalFrameworks: [SwarmJob.v1alpha1.swarm-operator.io]\n";
  const auto started = std::chrono::steady_clock::now();
  proc_ = spawn({"/usr/bin/env", "KUBECONFIG=" + env_.kubeconfig(), root_ + "/bin/kueue", "--config", config,
                 "--zap-log-level=2"},
                env_.dir() + "/kueue.log");
  // Ready when the mutating webhook answers: a ResourceFlavor made now gets Kueue's finalizer.
  const std::string path = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors";
  const bool ready = wait_until([&] {
    if (!proc_.alive()) throw std::runtime_error("kueue exited");
    mount_certificates();
    try {
      env_.client().create(path, {{"apiVersion", "kueue.x-k8s.io/v1beta2"}, {"kind", "ResourceFlavor"},
                                  {"metadata", {{"name", "readiness-probe"}}}});
    } catch (const kube::ApiError& e) {
      if (!e.conflict()) return false;
    }
    const json rf = env_.client().get(path + "/readiness-probe");
    const bool hooked = !rf["metadata"].value("finalizers", json::array()).empty();
    if (!hooked) env_.client().remove(path + "/readiness-probe");  // made before the webhook answered
    return hooked;
  }, std::chrono::seconds(180));
  if (!ready || !proc_.alive()) throw std::runtime_error("Kueue's webhooks did not answer:\n" + log_tail());
  ready_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // The probe flavor goes (Kueue's controller removes its finalizer: no ClusterQueue uses it).
  env_.client().remove(path + "/readiness-probe");
}

}  // namespace swarm::optest
