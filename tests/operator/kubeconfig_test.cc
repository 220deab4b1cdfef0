#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "operator/kube/config.h"
#include "operator/kube/time_format.h"

namespace swarm::kube {
namespace {

std::string temp_dir() {
  char t[] = "/tmp/kubeconfig-test-XXXXXX";
  return mkdtemp(t);
}

TEST(KubeConfig, ReadsInlineDataAndFilesRelativeToTheConfig) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/ca.crt") << "CA-PEM";
  std::ofstream(dir + "/config") << R"(apiVersion: v1
kind: Config
current-context: b
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443/", certificate-authority: ca.crt}
users:
- name: u1
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
- name: u2
  user: {token: secret-token}
contexts:
- name: a
  context: {cluster: c1, user: u1}
- name: b
  context: {cluster: c1, user: u2, namespace: team}
)";
  auto b = load_kubeconfig(dir + "/config");
  EXPECT_EQ(b.server, "https://10.0.0.1:6443");
  EXPECT_EQ(b.ca_pem, "CA-PEM");
  EXPECT_EQ(b.namespace_, "team");
  EXPECT_EQ(current_token(b), "secret-token");
  auto a = load_kubeconfig(dir + "/config", "a");
  EXPECT_EQ(a.client_cert_pem, "CERT");
  EXPECT_EQ(a.client_key_pem, "KEY");
  EXPECT_THROW(load_kubeconfig(dir + "/config", "nope"), std::runtime_error);
  EXPECT_THROW(load_kubeconfig(dir + "/missing"), std::runtime_error);
}

TEST(KubeConfig, InClusterServiceAccount) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/token") << "tok-1\n";
  std::ofstream(dir + "/ca.crt") << "CA";
  std::ofstream(dir + "/namespace") << "swarm-system";
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = load_in_cluster(dir);
  EXPECT_EQ(cfg.server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg.namespace_, "swarm-system");
  EXPECT_EQ(current_token(cfg), "tok-1");
  std::ofstream(dir + "/token") << "tok-2";  // rotated: read again on every request
  EXPECT_EQ(current_token(cfg), "tok-2");
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
}

TEST(TimeFormat, RoundTrips) {
  SystemTime t;
  ASSERT_TRUE(parse_time("2024-05-01T12:00:01Z", t));
  EXPECT_EQ(format_time(t), "2024-05-01T12:00:01Z");
  ASSERT_TRUE(parse_time("2024-05-01T12:00:01.250000Z", t));
  EXPECT_EQ(format_micro_time(t), "2024-05-01T12:00:01.250000Z");
  EXPECT_DOUBLE_EQ(to_seconds("2024-05-01T12:00:01.5Z") - to_seconds("2024-05-01T12:00:01Z"), 0.5);
  EXPECT_DOUBLE_EQ(to_seconds("2024-05-01T14:00:00+02:00"), to_seconds("2024-05-01T12:00:00Z"));
  EXPECT_FALSE(parse_time("yesterday", t));
}

}  // namespace
}  // namespace swarm::kube
