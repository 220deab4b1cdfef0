#include "operator/kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace swarm::kube {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string resolve(const std::string& base_dir, const std::string& p) {
  return (!p.empty() && p[0] == '/') ? p : base_dir + "/" + p;
}

YAML::Node find_named(const YAML::Node& list, const std::string& name, const std::string& what,
                      const std::string& path) {
  if (list) {
    for (const auto& item : list) {
      if (item["name"] && item["name"].as<std::string>() == name) return item;
    }
  }
  throw std::runtime_error(path + ": " + what + " " + name + " not found");
}

// `<field>-data` (base64) or `<field>` (a file relative to the kubeconfig's folder).
std::string data_or_file(const YAML::Node& n, const std::string& field, const std::string& base) {
  if (n[field + "-data"]) return base64_decode(n[field + "-data"].as<std::string>());
  if (n[field]) return read_file(resolve(base, n[field].as<std::string>()));
  return "";
}

}  // namespace

KubeConfig load_kubeconfig(const std::string& path, const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    throw std::runtime_error("kubeconfig " + path + ": " + e.what());
  }
  const std::string base = dir_of(path);
  std::string ctx_name = context;
  if (ctx_name.empty()) {
    if (!root["current-context"]) throw std::runtime_error(path + ": current-context: not set");
    ctx_name = root["current-context"].as<std::string>();
  }
  auto ctx = find_named(root["contexts"], ctx_name, "context", path)["context"];
  if (!ctx || !ctx["cluster"]) throw std::runtime_error(path + ": contexts[" + ctx_name + "].context.cluster: required");
  auto cluster = find_named(root["clusters"], ctx["cluster"].as<std::string>(), "cluster", path)["cluster"];
  KubeConfig cfg;
  if (!cluster || !cluster["server"]) throw std::runtime_error(path + ": clusters[].cluster.server: required");
  cfg.server = cluster["server"].as<std::string>();
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  cfg.ca_pem = data_or_file(cluster, "certificate-authority", base);
  cfg.insecure_skip_verify = cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>();
  if (ctx["namespace"]) cfg.namespace_ = ctx["namespace"].as<std::string>();
  if (ctx["user"]) {
    auto user = find_named(root["users"], ctx["user"].as<std::string>(), "user", path)["user"];
    if (user) {
      cfg.client_cert_pem = data_or_file(user, "client-certificate", base);
      cfg.client_key_pem = data_or_file(user, "client-key", base);
      if (user["token"]) cfg.token = user["token"].as<std::string>();
      if (user["tokenFile"]) cfg.token_file = resolve(base, user["tokenFile"].as<std::string>());
      if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty())
        throw std::runtime_error(path + ": users[" + ctx["user"].as<std::string>() +
                                 "]: client-certificate and client-key must be given together");
    }
  }
  return cfg;
}

KubeConfig load_in_cluster(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port) throw std::runtime_error("not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset");
  KubeConfig cfg;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  cfg.server = "https://" + h + ":" + port;
  cfg.token_file = sa_dir + "/token";
  cfg.ca_pem = read_file(sa_dir + "/ca.crt");
  try {
    cfg.namespace_ = read_file(sa_dir + "/namespace");
  } catch (...) {
  }
  return cfg;
}

KubeConfig load_default(const std::string& path, const std::string& context) {
  if (!path.empty()) return load_kubeconfig(path, context);
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string first = env;
    first = first.substr(0, first.find(':'));
    return load_kubeconfig(first, context);
  }
  if (std::getenv("KUBERNETES_SERVICE_HOST")) return load_in_cluster();
  const char* home = std::getenv("HOME");
  return load_kubeconfig(std::string(home ? home : "") + "/.kube/config", context);
}

std::string current_token(const KubeConfig& cfg) {
  if (!cfg.token_file.empty()) {
    std::string t = read_file(cfg.token_file);
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    return t;
  }
  return cfg.token;
}

std::string base64_decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (unsigned char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    auto pos = chars.find(static_cast<char>(c));
    if (pos == std::string::npos) throw std::runtime_error("invalid base64 data");
    val = (val << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

}  // namespace swarm::kube
