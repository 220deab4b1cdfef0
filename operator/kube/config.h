// Where the API server is and how to prove who we are: a kubeconfig file (the current context or
// a named one) or the in-cluster service account. Only what the operator needs is supported:
// server URL, CA bundle, client certificate + key, bearer token (inline or from a file, re-read on
// every request so projected service-account tokens keep working after rotation).
#pragma once

#include <string>

namespace swarm::kube {

struct KubeConfig {
  std::string server;           // https://host:port (no trailing slash)
  std::string ca_pem;           // CA bundle to verify the server; empty = system roots
  std::string client_cert_pem;  // client certificate (PEM), with client_key_pem
  std::string client_key_pem;
  std::string token;            // bearer token
  std::string token_file;       // read for every request when set (service-account tokens rotate)
  bool insecure_skip_verify = false;
  std::string namespace_ = "default";  // the context's namespace, or the pod's
};

// Parses a kubeconfig file. `context` empty = current-context. Throws std::runtime_error naming the
// file and the missing or bad field.
KubeConfig load_kubeconfig(const std::string& path, const std::string& context = "");

// The pod's service account: KUBERNETES_SERVICE_HOST/PORT, the token and CA under
// /var/run/secrets/kubernetes.io/serviceaccount (override the folder for tests).
KubeConfig load_in_cluster(const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// `path` if given, else $KUBECONFIG, else in-cluster when KUBERNETES_SERVICE_HOST is set, else
// ~/.kube/config.
KubeConfig load_default(const std::string& path = "", const std::string& context = "");

// The bearer token to send now ("" = none).
std::string current_token(const KubeConfig& cfg);

// Decodes base64 (kubeconfig's *-data fields, a Secret's data); throws std::runtime_error on a
// character outside the alphabet.
std::string base64_decode(const std::string& in);

}  // namespace swarm::kube
