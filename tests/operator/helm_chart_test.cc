// The Helm chart (helm/swarm-operator) with a real helm (scripts/k8s/build-helm.sh, built once from
// the Go module proxy and cached): lint, render with default and non-default values, apply the
// rendering to a real API server, and run the operator as the chart's ServiceAccount (a token from
// the TokenRequest API, RBAC enforced by the API server) to show that the chart's RBAC is what the
// operator needs: it leads through the Lease and runs a SwarmJob.
#include <gtest/gtest.h>

#include <fstream>

#include "operator/controller/manifests.h"

#include "tests/operator/fixtures.h"

namespace swarm::optest {
namespace {

using namespace swarm::op;

using namespace std::chrono_literals;

const std::string kChart = std::string(SWARM_SOURCE_DIR) + "/helm/swarm-operator";

std::string helm() {
  static std::string path = [] {
    std::string out;
    if (run_command(std::string(SWARM_SOURCE_DIR) + "/scripts/k8s/build-helm.sh 2>/dev/null", &out) != 0) return std::string();
    std::string p = tail(out, 1);
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    return p;
  }();
  return path;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Objects of a kubectl List (-o json) by "Kind/name".
std::map<std::string, json> by_kind_and_name(const json& list) {
  std::map<std::string, json> out;
  for (const auto& item : list.value("items", json::array()))
    out[item.value("kind", "") + "/" + item["metadata"].value("name", "")] = item;
  return out;
}

bool has_arg(const json& container, const std::string& arg) {
  for (const auto& a : container.value("args", json::array()))
    if (a == arg) return true;
  return false;
}

const char* kNonDefaultValues = R"(image:
  repository: localhost/swarm-operator
  tag: dev
  pullPolicy: Never
replicas: 1
watchNamespace: team-a
workers: 8
logLevel: debug
metricsPort: 9090
progress:
  periodSeconds: 5
  timeoutSeconds: 2
  windowSeconds: 30
  registryUrlTemplate: "http://{job}-registry.{namespace}.svc.cluster.example:7400"
networkPolicy:
  enabled: true
  monitoringNamespace: prom
kueue:
  enabled: true
  defaultQueueName: team-queue
podAnnotations:
  prometheus.io/scrape: "true"
resources:
  requests: {cpu: 250m, memory: 128Mi}
  limits: {memory: 1Gi}
nodeSelector:
  swarm-operator.io/node-class: on-demand
tolerations:
- {key: dedicated, operator: Equal, value: control, effect: NoSchedule}
)";

TEST(HelmChart, LintsStrictlyWithDefaultAndNonDefaultValues) {
  ASSERT_FALSE(helm().empty()) << "scripts/k8s/build-helm.sh failed";
  char tmpl[] = "/tmp/swarm-helm-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string values = write_file(tmpl, "values.yaml", kNonDefaultValues);
  std::string out;
  EXPECT_EQ(run_command(helm() + " lint --strict " + kChart, &out), 0) << out;
  EXPECT_NE(out.find("1 chart(s) linted, 0 chart(s) failed"), std::string::npos) << out;
  EXPECT_EQ(run_command(helm() + " lint --strict " + kChart + " -f " + values, &out), 0) << out;
  EXPECT_NE(out.find("0 chart(s) failed"), std::string::npos) << out;
  EXPECT_EQ(run_command(helm() + " lint --strict " + kChart + " -f " + values +
                            " --set monitoring.dashboard.enabled=true --set monitoring.podMonitor.enabled=true",
                        &out), 0) << out;
  EXPECT_NE(out.find("0 chart(s) failed"), std::string::npos) << out;
  // The chart's CRD is the repository's (crds/ is a link, not a copy that could drift).
  ASSERT_EQ(run_command("{ " + helm() + " show crds " + kChart + " 2>/dev/null; }", &out), 0) << out;
  while (out.size() > 1 && out.back() == '\n' && out[out.size() - 2] == '\n') out.pop_back();  // helm adds a blank line
  EXPECT_EQ(out, read_text(std::string(SWARM_SOURCE_DIR) + "/crds/swarm-operator.io_swarmjobs.yaml"));
  run_command(std::string("rm -rf ") + tmpl);
}

class HelmChartApplied : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(helm().empty()) << "scripts/k8s/build-helm.sh failed";
    env_ = std::make_unique<TestEnv>();
    std::string out;
    ASSERT_EQ(env_->kubectl("create namespace swarm-system", &out), 0) << out;
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << tail(read_text(env_->dir() + "/sa-operator.log"), 40) << "\n";
    if (op_.pid > 0) op_.stop();
    env_.reset();
  }
  // helm template into a file; returns its path.
  std::string render(const std::string& extra) {
    std::string out;
    const std::string path = env_->dir() + "/rendered.yaml";
    // stderr apart: helm notes there that the chart's crds/ is a link to the repository's crds/.
    EXPECT_EQ(run_command("{ " + helm() + " template swarm " + kChart + " --namespace swarm-system --include-crds " +
                          extra + " > " + path + " 2>" + path + ".err; }", &out), 0) << read_text(path + ".err");
    return path;
  }
  std::unique_ptr<TestEnv> env_;
  Process op_;
};

TEST_F(HelmChartApplied, DefaultsApplyAndTheServiceAccountCanRunTheOperator) {
  const std::string rendered = render("");
  std::string out;
  ASSERT_EQ(env_->kubectl("apply -f " + rendered, &out), 0) << out;
  for (const char* obj : {"customresourcedefinition.apiextensions.k8s.io/swarmjobs.swarm-operator.io",
                          "serviceaccount/swarm-operator", "clusterrole.rbac.authorization.k8s.io/swarm-operator",
                          "deployment.apps/swarm-operator", "service/swarm-operator-metrics"})
    EXPECT_NE(out.find(obj), std::string::npos) << obj << " not applied:\n" << out;

  // The Deployment as the API server stored it (defaults filled in).
  const json dep = env_->client().get("/apis/apps/v1/namespaces/swarm-system/deployments/swarm-operator");
  EXPECT_EQ(dep["spec"]["replicas"], 2);
  const json& pod = dep["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "swarm-operator");
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "ghcr.io/swarm-operator/swarm-operator:0.1.0");
  EXPECT_EQ(c["command"], json::array({"swarm-operator"}));
  for (const char* arg : {"--metrics-bind=0.0.0.0:8080", "--lease-namespace=swarm-system", "--identity=$(POD_NAME)",
                          "--lease-duration=15", "--workers=4", "--progress-period=10", "--progress-timeout=3",
                          "--registry-url-template=http://{job}-registry.{namespace}.svc:7400"})
    EXPECT_TRUE(has_arg(c, arg)) << arg << " missing: " << c["args"].dump();
  EXPECT_FALSE(has_arg(c, "--namespace="));
  // No NetworkPolicies unless asked (networkPolicy.enabled).
  for (const auto& a : c["args"]) {
    EXPECT_NE(a.get<std::string>().rfind("--network-policies", 0), 0u) << c["args"].dump();
    EXPECT_NE(a.get<std::string>().rfind("--monitoring-namespace", 0), 0u) << c["args"].dump();
  }
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["resources"]["limits"]["memory"], "512Mi");
  const json svc = env_->client().get("/api/v1/namespaces/swarm-system/services/swarm-operator-metrics");
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 8080);
  EXPECT_EQ(svc["spec"]["selector"]["app.kubernetes.io/name"], "swarm-operator");

  // RBAC as the API server evaluates it for the chart's ServiceAccount (SubjectAccessReview).
  auto allowed = [&](const std::string& verb, const std::string& group, const std::string& resource,
                     const std::string& ns, const std::string& subresource = "") {
    json attrs = {{"verb", verb}, {"group", group}, {"resource", resource}};
    if (!ns.empty()) attrs["namespace"] = ns;
    if (!subresource.empty()) attrs["subresource"] = subresource;
    const json review = env_->client().create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {{"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"},
         {"spec", {{"user", "system:serviceaccount:swarm-system:swarm-operator"},
                   {"groups", {"system:serviceaccounts", "system:serviceaccounts:swarm-system", "system:authenticated"}},
                   {"resourceAttributes", attrs}}}});
    return review["status"].value("allowed", false);
  };
  EXPECT_TRUE(allowed("watch", "swarm-operator.io", "swarmjobs", ""));
  EXPECT_TRUE(allowed("patch", "swarm-operator.io", "swarmjobs", "team-a", "status"));
  EXPECT_TRUE(allowed("create", "", "pods", "team-a"));
  EXPECT_TRUE(allowed("delete", "", "pods", "team-a"));
  EXPECT_TRUE(allowed("list", "", "nodes", ""));
  EXPECT_TRUE(allowed("create", "", "events", "team-a"));
  EXPECT_TRUE(allowed("create", "", "secrets", "team-a"));
  // The progress poller reads each job's secret to sign its registry requests; one at a time, by name.
  EXPECT_TRUE(allowed("get", "", "secrets", "team-a"));
  EXPECT_FALSE(allowed("list", "", "secrets", "team-a"));
  EXPECT_TRUE(allowed("update", "coordination.k8s.io", "leases", "swarm-system"));
  EXPECT_FALSE(allowed("delete", "", "nodes", ""));
  EXPECT_FALSE(allowed("patch", "", "nodes", ""));
  EXPECT_FALSE(allowed("update", "coordination.k8s.io", "leases", "default"));  // only the release namespace
  EXPECT_FALSE(allowed("delete", "swarm-operator.io", "swarmjobs", "team-a"));   // users own their jobs
  EXPECT_FALSE(allowed("update", "swarm-operator.io", "swarmjobs", "team-a"));
  EXPECT_FALSE(allowed("get", "networking.k8s.io", "networkpolicies", "team-a"));  // least privilege: off
  EXPECT_FALSE(allowed("create", "networking.k8s.io", "networkpolicies", "team-a"));
  EXPECT_FALSE(allowed("list", "kueue.x-k8s.io", "workloads", "team-a"));  // Kueue: off by default
  EXPECT_FALSE(allowed("patch", "kueue.x-k8s.io", "workloads", "team-a", "status"));
  EXPECT_FALSE(allowed("list", "kueue.x-k8s.io", "resourceflavors", ""));
  EXPECT_FALSE(allowed("patch", "swarm-operator.io", "swarmjobs", "team-a"));

  // The operator itself, authenticated as that ServiceAccount (a TokenRequest token): it must
  // take the Lease in the release namespace and run a job, which exercises every rule it needs.
  std::string token;
  ASSERT_EQ(env_->kubectl("create token swarm-operator -n swarm-system --duration=1h", &token), 0) << token;
  while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
  std::string server;
  ASSERT_EQ(env_->kubectl("config view --minify -o jsonpath={.clusters[0].cluster.server}", &server), 0);
  const std::string kubeconfig = write_file(env_->dir(), "sa.kubeconfig",
      "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
      "\n    certificate-authority: " + env_->dir() + "/pki/ca.crt\nusers:\n- name: sa\n  user:\n    token: " + token +
      "\ncontexts:\n- name: c\n  context: {cluster: c, user: sa, namespace: swarm-system}\ncurrent-context: c\n");
  const int metrics_port = free_port();
  op_ = spawn({std::string(SWARM_BINARY_DIR) + "/bin/swarm-operator", "--kubeconfig", kubeconfig, "--metrics-bind",
               "127.0.0.1:" + std::to_string(metrics_port), "--identity", "sa-op", "--lease-namespace", "swarm-system",
               "--progress-period", "0", "--retry-period", "0.5", "--log-level", "debug"},
              env_->dir() + "/sa-operator.log");
  env_->start_fake_kubelet();
  create_standard_nodes(*env_);
  ASSERT_EQ(env_->apply_yaml(job_yaml("rbac", two_pool_spec(2, 1, 4)), &out), 0) << out;
  ASSERT_TRUE(wait_until([&] {
    const json lease = env_->client().get("/apis/coordination.k8s.io/v1/namespaces/swarm-system/leases/swarm-operator");
    return lease["spec"].value("holderIdentity", "") == "sa-op";
  }, 30s));
  ASSERT_TRUE(wait_until([&] { return env_->get_job("rbac")["status"].value("phase", "") == "Running"; }, 40s))
      << env_->get_job("rbac").dump(2);
  EXPECT_EQ(live_workers(*env_, "rbac").size(), 2u);
  EXPECT_EQ(env_->kubectl("get configmap rbac-spec", &out), 0) << out;
  EXPECT_EQ(env_->kubectl("get secret rbac-secret", &out), 0) << out;
  ASSERT_TRUE(wait_until([&] {
    env_->kubectl("get events --field-selector involvedObject.name=rbac", &out);
    return out.find("WorkerCreated") != std::string::npos;
  }, 10s)) << out;
  // No request of the operator was refused.
  const std::string log = read_text(env_->dir() + "/sa-operator.log");
  EXPECT_EQ(log.find("forbidden"), std::string::npos) << tail(log, 30);
  EXPECT_EQ(log.find("403"), std::string::npos) << tail(log, 30);
  std::string ready;
  EXPECT_EQ(run_command("curl -sf http://127.0.0.1:" + std::to_string(metrics_port) + "/readyz", &ready), 0) << ready;
  EXPECT_TRUE(op_.alive());
}

TEST_F(HelmChartApplied, NonDefaultValuesRenderAsAsked) {
  const std::string values = write_file(env_->dir(), "values.yaml", kNonDefaultValues);
  const std::string rendered = render("-f " + values);
  std::string out;
  ASSERT_EQ(env_->kubectl("apply --dry-run=server -o json -f " + rendered, &out), 0) << out;
  const auto objs = by_kind_and_name(json::parse(out));
  ASSERT_TRUE(objs.count("Deployment/swarm-operator")) << out.substr(0, 2000);
  for (const char* k : {"CustomResourceDefinition/swarmjobs.swarm-operator.io", "ServiceAccount/swarm-operator",
                        "ClusterRole/swarm-operator", "ClusterRoleBinding/swarm-operator",
                        "Role/swarm-operator-leader-election", "RoleBinding/swarm-operator-leader-election",
                        "Service/swarm-operator-metrics"})
    EXPECT_TRUE(objs.count(k)) << k;
  const json& dep = objs.at("Deployment/swarm-operator");
  EXPECT_EQ(dep["spec"]["replicas"], 1);
  const json& pod = dep["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["swarm-operator.io/node-class"], "on-demand");
  EXPECT_EQ(pod["spec"]["tolerations"][0]["key"], "dedicated");
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["image"], "localhost/swarm-operator:dev");
  EXPECT_EQ(c["imagePullPolicy"], "Never");
  EXPECT_EQ(c["ports"][0]["containerPort"], 9090);
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "250m");
  for (const char* arg : {"--namespace=team-a", "--workers=8", "--log-level=debug", "--metrics-bind=0.0.0.0:9090",
                          "--progress-period=5", "--progress-timeout=2", "--progress-window=30",
                          "--registry-url-template=http://{job}-registry.{namespace}.svc.cluster.example:7400",
                          "--network-policies", "--monitoring-namespace=prom", "--kueue",
                          "--kueue-default-queue=team-queue"})
    EXPECT_TRUE(has_arg(c, arg)) << arg << " missing: " << c["args"].dump();
  EXPECT_EQ(objs.at("Service/swarm-operator-metrics")["spec"]["ports"][0]["port"], 9090);
  // networkPolicy.enabled: the ClusterRole may manage NetworkPolicies (the default has no such rule,
  // DefaultsApplyAndTheServiceAccountCanRunTheOperator).
  int policy_rules = 0;
  for (const auto& rule : objs.at("ClusterRole/swarm-operator")["rules"]) {
    if (rule["resources"] != json::array({"networkpolicies"})) continue;
    ++policy_rules;
    EXPECT_EQ(rule["apiGroups"], json::array({"networking.k8s.io"}));
    EXPECT_EQ(rule["verbs"], json::array({"get", "create", "delete", "patch"}));
  }
  EXPECT_EQ(policy_rules, 1) << objs.at("ClusterRole/swarm-operator").dump(2);
  // kueue.enabled: Workloads and their status, flavors and priority classes read, spec.suspend.
  std::map<std::string, json> kueue_rules;
  for (const auto& rule : objs.at("ClusterRole/swarm-operator")["rules"])
    for (const auto& r : rule["resources"]) kueue_rules[rule["apiGroups"][0].get<std::string>() + "/" + r.get<std::string>()] = rule["verbs"];
  EXPECT_EQ(kueue_rules["kueue.x-k8s.io/workloads"], json::array({"get", "list", "watch", "create", "delete", "patch"}));
  EXPECT_EQ(kueue_rules["kueue.x-k8s.io/workloads/status"], json::array({"get", "patch"}));
  EXPECT_EQ(kueue_rules["kueue.x-k8s.io/resourceflavors"], json::array({"get", "list", "watch"}));
  EXPECT_EQ(kueue_rules["kueue.x-k8s.io/workloadpriorityclasses"], json::array({"get", "list", "watch"}));
  EXPECT_EQ(kueue_rules["swarm-operator.io/swarmjobs/finalizers"], json::array({"update"}));
  // Every flag the chart passes is one the operator accepts: with them it gets as far as loading
  // its (here missing) kubeconfig, past CLI11's checks of names and values.
  std::string cmd = std::string(SWARM_BINARY_DIR) + "/bin/swarm-operator";
  for (const auto& a : c["args"]) cmd += " '" + a.get<std::string>() + "'";
  EXPECT_EQ(run_command(cmd + " --kubeconfig " + env_->dir() + "/missing-kubeconfig", &out), 1) << out;
  EXPECT_NE(out.find("missing-kubeconfig"), std::string::npos) << out;
  EXPECT_EQ(out.find("not expected"), std::string::npos) << out;
}

// A stand-in for one of the prometheus-operator's CRDs (the kind only, any fields), so that the
// API server accepts the chart's PodMonitors and PrometheusRule as it would in a cluster with
// kube-prometheus-stack.
std::string stand_in_crd(const std::string& kind, const std::string& plural) {
  std::string singular = plural.substr(0, plural.size() - 1);
  return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: " + plural +
         ".monitoring.coreos.com}\nspec:\n  group: monitoring.coreos.com\n  scope: Namespaced\n"
         "  names: {kind: " + kind + ", listKind: " + kind + "List, plural: " + plural + ", singular: " + singular +
         "}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n"
         "      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
}

TEST_F(HelmChartApplied, MonitoringShipsTheDashboardAndPodMonitorsMatchingTheOperatorsPods) {
  std::string out;
  // Off by default.
  ASSERT_EQ(env_->kubectl("apply --dry-run=server -o json -f " + render(""), &out), 0) << out;
  for (const auto& [key, _] : by_kind_and_name(json::parse(out))) {
    EXPECT_EQ(key.find("PodMonitor/"), std::string::npos) << key;
    EXPECT_NE(key, "ConfigMap/swarm-operator-dashboard");
  }

  const std::string crds = write_file(env_->dir(), "monitoring-crds.yaml",
                                     stand_in_crd("PodMonitor", "podmonitors") + "---\n" +
                                         stand_in_crd("PrometheusRule", "prometheusrules"));
  ASSERT_EQ(env_->kubectl("apply -f " + crds, &out), 0) << out;
  ASSERT_TRUE(wait_until([&] {
    return env_->kubectl("get podmonitors -A", &out) == 0 && env_->kubectl("get prometheusrules -A", &out) == 0;
  }, 20s)) << out;
  const std::string rendered =
      render("--set monitoring.dashboard.enabled=true --set monitoring.podMonitor.enabled=true "
             "--set monitoring.podMonitor.labels.release=kps --set monitoring.prometheusRule.enabled=true "
             "--set monitoring.prometheusRule.labels.release=kps --set watchNamespace=team-a");
  ASSERT_EQ(env_->kubectl("apply --dry-run=server -o json -f " + rendered, &out), 0) << out;
  const auto objs = by_kind_and_name(json::parse(out));

  // The dashboard for Grafana's sidecar: the repository's dashboards/swarm-operator.json.
  ASSERT_TRUE(objs.count("ConfigMap/swarm-operator-dashboard")) << out.substr(0, 2000);
  const json& cm = objs.at("ConfigMap/swarm-operator-dashboard");
  EXPECT_EQ(cm["metadata"]["labels"]["grafana_dashboard"], "1");
  const std::string dashboard = read_text(std::string(SWARM_SOURCE_DIR) + "/dashboards/swarm-operator.json");
  std::string shipped = cm["data"]["swarm-operator.json"];
  EXPECT_EQ(json::parse(shipped), json::parse(dashboard));

  // The alerting rules, every one of dashboards/swarm-operator.rules.yaml, their Prometheus
  // templates untouched by helm.
  ASSERT_TRUE(objs.count("PrometheusRule/swarm-operator"));
  const json& rule = objs.at("PrometheusRule/swarm-operator");
  EXPECT_EQ(rule["metadata"]["labels"]["release"], "kps");
  std::vector<std::string> shipped_alerts, file_alerts;
  for (const auto& g : rule["spec"]["groups"])
    for (const auto& r : g["rules"]) {
      shipped_alerts.push_back(r["alert"]);
      EXPECT_NE(r["annotations"]["summary"].get<std::string>().find("{{ $labels."), std::string::npos) << r.dump();
    }
  const std::string rules_text = read_text(std::string(SWARM_SOURCE_DIR) + "/dashboards/swarm-operator.rules.yaml");
  for (size_t at = rules_text.find("- alert: "); at != std::string::npos; at = rules_text.find("- alert: ", at + 1))
    file_alerts.push_back(rules_text.substr(at + 9, rules_text.find('\n', at) - at - 9));
  EXPECT_EQ(shipped_alerts, file_alerts);
  EXPECT_GE(file_alerts.size(), 8u);

  // The jobs' PodMonitor selects what the operator labels its pods with, on the ports its pods
  // name, and turns the job label into the dashboard's `swarmjob`.
  ASSERT_TRUE(objs.count("PodMonitor/swarm-operator-jobs"));
  ASSERT_TRUE(objs.count("PodMonitor/swarm-operator"));
  const json& jobs = objs.at("PodMonitor/swarm-operator-jobs");
  EXPECT_EQ(jobs["metadata"]["labels"]["release"], "kps");
  EXPECT_EQ(jobs["spec"]["selector"]["matchLabels"][kLabelManagedBy], kManagedByValue);
  EXPECT_EQ(jobs["spec"]["namespaceSelector"]["matchNames"], json::array({"team-a"}));
  std::string job_label = kLabelJob;
  for (auto& ch : job_label)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  std::set<std::string> ports;
  for (const auto& ep : jobs["spec"]["podMetricsEndpoints"]) {
    ports.insert(ep["port"].get<std::string>());
    EXPECT_EQ(ep["path"], "/metrics");
    ASSERT_EQ(ep["relabelings"].size(), 1u);
    EXPECT_EQ(ep["relabelings"][0]["sourceLabels"], json::array({"__meta_kubernetes_pod_label_" + job_label}));
    EXPECT_EQ(ep["relabelings"][0]["targetLabel"], "swarmjob");
  }
  EXPECT_EQ(ports, (std::set<std::string>{"metrics", "http"}));
  // Those port names and that label are the ones the operator's pods carry (the manifests the
  // operator creates them from).
  const SwarmJob job = parse_swarmjob({{"apiVersion", kGroupVersion}, {"kind", "SwarmJob"},
                                       {"metadata", {{"name", "mon"}, {"namespace", "team-a"}, {"uid", "u1"}}},
                                       {"spec", json::object()}});
  const std::pair<json, const char*> pods[] = {{worker_pod(job, 0, 0, nullptr, {}, "Initial"), "metrics"},
                                               {trainer_pod(job, 0, nullptr, {}), "metrics"},
                                               {registry_pod(job, 0, nullptr, {}), "http"}};
  for (const auto& [pod, port] : pods) {
    SCOPED_TRACE(pod["metadata"]["name"].get<std::string>());
    EXPECT_EQ(pod["metadata"]["labels"][kLabelJob], "mon");
    EXPECT_EQ(pod["metadata"]["labels"][kLabelManagedBy], kManagedByValue);
    const json ports_of_pod = pod["spec"]["containers"][0].value("ports", json::array());
    std::set<std::string> names;
    for (const auto& p : ports_of_pod) names.insert(p.value("name", ""));
    EXPECT_TRUE(names.count(port)) << pod["spec"]["containers"][0].dump();
  }
}

}  // namespace
}  // namespace swarm::optest
