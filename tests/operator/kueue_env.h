// Kueue v0.17.0 for the operator's integration tests: the real controller manager
// (sigs.k8s.io/kueue/cmd/kueue, built once by scripts/k8s/build-kueue.sh and cached), run as a
// process against a TestEnv's API server, with its own CRDs and webhooks from the module's config/.
//
// Out of a cluster its webhooks need a route from the API server. What is done here:
//   - kube-apiserver runs with --enable-aggregator-routing=true (kueue_apiserver_args()): it reaches
//     a webhook Service through the Service's EndpointSlice, not its ClusterIP (nothing routes
//     ClusterIPs without kube-proxy);
//   - Service kueue-system/kueue-webhook-service without a selector, and an EndpointSlice of it
//     pointing at this machine's first non-loopback IPv4 address (the API server refuses loopback
//     endpoints) and a free port, where Kueue's webhook server listens (webhook.host/port);
//   - Kueue's internal certificate management (as in its release) makes the CA and serving
//     certificate for kueue-webhook-service.kueue-system.svc, writes them into the Secret
//     kueue-webhook-server-cert (created empty first, config/components/internalcert) and puts the
//     CA into the webhook configurations and the CRDs' conversion webhooks; the API server checks
//     the certificate against that name. The test copies the Secret's files into webhook.certDir,
//     as a kubelet mounting the Secret would (Kueue waits for them there);
//   - the CRDs are the module's config/components/crd/bases with the conversion-webhook patches of
//     config/components/crd/patches (as the release's kustomize applies them), and the webhook
//     configurations are those of config/components/webhook/manifests.yaml for the
//     kueue.x-k8s.io group only (the others are for job integrations that are not enabled here:
//     a pod webhook with no handler behind it would refuse every pod). Named as the release names
//     them (kueue- prefix, namespace kueue-system).
// Configuration: integrations.frameworks [batch/job], externalFrameworks
// [SwarmJob.v1alpha1.swarm-operator.io], no leader election, no metrics or visibility server.
#pragma once

#include <string>
#include <vector>

#include "tests/operator/testenv.h"

namespace swarm::optest {

// The API server flags Kueue's webhooks need here (see above).
std::vector<std::string> kueue_apiserver_args();

// This machine's first non-loopback IPv4 address, "" when it has none.
std::string host_address();

class KueueEnv {
 public:
  // Builds Kueue if it is not cached (scripts/k8s/build-kueue.sh), installs it into `env` and starts
  // it; returns once a ResourceFlavor made through the API server got the finalizer Kueue's mutating
  // webhook adds. Throws with the logs' tails on failure.
  explicit KueueEnv(TestEnv& env);
  ~KueueEnv();

  void stop();
  std::string log_tail(size_t lines = 40) const;
  double ready_seconds() const { return ready_seconds_; }  // process start -> webhooks answer

 private:
  void install_crds();
  void install_webhooks();
  void route_webhooks();
  void start();
  void mount_certificates();

  TestEnv& env_;
  std::string root_, host_;
  int port_ = 0;
  Process proc_;
  double ready_seconds_ = 0;
};

}  // namespace swarm::optest
