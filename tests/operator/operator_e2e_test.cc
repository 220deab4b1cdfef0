// The operator against a real control plane: placement of the examples, reclaim notices (taints,
// node deletion, NotReady), stage reassignment, pool overflow and move back.
#include <gtest/gtest.h>


#include <map>
#include <optional>
#include <set>

#include "operator/kube/time_format.h"
#include "tests/operator/fixtures.h"

namespace swarm::optest {
namespace {

using namespace std::chrono_literals;

class OperatorE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<TestEnv>();
    env_->start_fake_kubelet();
  }
  void TearDown() override {
    if (HasFailure() && env_) {  // null when the control plane did not start
      std::string out;
      env_->kubectl("get pods -o wide", &out);
      std::cerr << out << "\n" << tail(read_text(env_->dir() + "/op-1.log"), 40) << "\n";
    }
    env_.reset();
  }
  std::unique_ptr<TestEnv> env_;
};

std::string node_of(const json& pod) { return pod["spec"].value("nodeName", ""); }

TEST_F(OperatorE2E, ExamplesCreateTheExpectedPodsWithTheExpectedPlacement) {
  create_standard_nodes(*env_);
  auto op = env_->start_operator();
  std::string out;
  ASSERT_EQ(env_->kubectl("apply -f " + std::string(SWARM_SOURCE_DIR) + "/examples/", &out), 0) << out;

  // tiny-lm: 2 stages x 1 worker, 1 trainer, 1 registry, anywhere (no pools).
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "tiny-lm")) == 2; }, 30s));
  ASSERT_TRUE(wait_until([&] { return env_->get_job("tiny-lm")["status"].value("phase", "") == "Running"; }, 30s));
  EXPECT_EQ(env_->pods("swarm-operator.io/job=tiny-lm,swarm-operator.io/role=trainer").size(), 1u);
  EXPECT_EQ(env_->pods("swarm-operator.io/job=tiny-lm,swarm-operator.io/role=registry").size(), 1u);

  // spot-lm: 3 stages x 2 workers; spot-us (priority 100) takes 4, spot-eu the other 2.
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "spot-lm")) == 6; }, 30s));
  const json job = env_->get_job("spot-lm");
  std::map<std::string, int> by_pool;
  std::map<std::string, int> by_stage;
  for (const auto& p : live_workers(*env_, "spot-lm")) {
    const std::string pool = label(p, "swarm-operator.io/pool");
    ++by_pool[pool];
    ++by_stage[label(p, "swarm-operator.io/stage")];
    const auto& spec = p["spec"];
    const std::string region = pool == "spot-us" ? "us-central1" : "europe-west4";
    EXPECT_EQ(spec["nodeSelector"]["topology.kubernetes.io/region"], region);
    EXPECT_EQ(spec["nodeSelector"]["cloud.google.com/gke-spot"], "true");
    EXPECT_EQ(spec["tolerations"][0]["key"], "cloud.google.com/gke-spot");
    EXPECT_EQ(spec["topologySpreadConstraints"].size(), 2u);
    EXPECT_EQ(spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
    EXPECT_EQ(p["metadata"]["ownerReferences"][0]["uid"], job["metadata"]["uid"]);
    EXPECT_EQ(p["metadata"]["ownerReferences"][0]["controller"], true);
    // The real scheduler put it on a node of that region.
    const json node = env_->client().get("/api/v1/nodes/" + node_of(p));
    EXPECT_EQ(node["metadata"]["labels"]["topology.kubernetes.io/region"], region) << p["metadata"]["name"];
  }
  EXPECT_EQ(by_pool["spot-us"], 4);
  EXPECT_EQ(by_pool["spot-eu"], 2);
  EXPECT_EQ(by_stage["0"], 2);
  EXPECT_EQ(by_stage["1"], 2);
  EXPECT_EQ(by_stage["2"], 2);
  // Trainers and registry on the non-preemptible pool.
  for (const auto& p : env_->pods("swarm-operator.io/job=spot-lm,swarm-operator.io/role in (trainer,registry)")) {
    EXPECT_EQ(p["spec"]["nodeSelector"]["swarm-operator.io/node-class"], "on-demand");
    EXPECT_TRUE(wait_until([&] {
      return node_of(env_->client().get("/api/v1/namespaces/default/pods/" + p["metadata"].value("name", ""))) == "us-ondemand-0";
    }, 20s));
  }
  EXPECT_EQ(env_->pods("swarm-operator.io/job=spot-lm,swarm-operator.io/role=trainer").size(), 2u);
  // Discovery: the registry Service, one headless Service per stage, the spec and the secret.
  for (const char* svc : {"spot-lm-registry", "spot-lm-stage-0", "spot-lm-stage-1", "spot-lm-stage-2"})
    EXPECT_EQ(env_->kubectl(std::string("get service ") + svc, &out), 0) << out;
  EXPECT_EQ(env_->kubectl("get configmap spot-lm-spec", &out), 0) << out;
  EXPECT_EQ(env_->kubectl("get secret spot-lm-secret", &out), 0) << out;

  ASSERT_TRUE(wait_until([&] { return env_->get_job("spot-lm")["status"].value("workersReady", "") == "6/6"; }, 20s));
  ASSERT_EQ(env_->kubectl("get swarmjobs", &out), 0);
  EXPECT_NE(out.find("PHASE"), std::string::npos) << out;
  EXPECT_NE(out.find("SAMPLES/S"), std::string::npos) << out;
  EXPECT_NE(out.find("6/6"), std::string::npos) << out;
  EXPECT_NE(out.find("Running"), std::string::npos) << out;
  ASSERT_EQ(env_->kubectl("get events --field-selector involvedObject.kind=SwarmJob", &out), 0);
  EXPECT_NE(out.find("WorkerCreated"), std::string::npos) << out;
  EXPECT_GT(op.metric("swarm_operator_jobs{phase=\"Running\"}"), 1.5);
}

// Issue 29: a job deleted and re-created under its name got a new generated secret, so it could
// not authenticate its own checkpoints. The generated Secret of a job with a checkpoint location
// outlives the job (no owner reference: the garbage collector leaves it; the operator does not
// delete it) and the re-created job takes it up, once, with an Event. Without a checkpoint
// location the Secret is owned by the job and goes with it.
TEST_F(OperatorE2E, ARecreatedJobTakesUpTheSecretItsCheckpointsNeed) {
  create_standard_nodes(*env_);
  auto op = env_->start_operator();
  const std::string secrets = "/api/v1/namespaces/default/secrets/";
  ASSERT_EQ(env_->apply_yaml(job_yaml("again", two_pool_spec(2, 1, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return env_->client().get_if_exists(secrets + "again-secret").has_value(); }, 20s));
  const json first = env_->client().get(secrets + "again-secret");
  const std::string uid1 = env_->get_job("again")["metadata"]["uid"];
  EXPECT_TRUE(first["metadata"].value("ownerReferences", json::array()).empty()) << first["metadata"].dump();
  EXPECT_EQ(first["metadata"]["annotations"].value("swarm-operator.io/kept-for-checkpoints", ""), "/checkpoints");
  EXPECT_EQ(first["metadata"]["annotations"].value("swarm-operator.io/job-uid", ""), uid1);
  std::string out;
  ASSERT_EQ(env_->kubectl("delete swarmjob again", &out), 0) << out;
  ASSERT_TRUE(wait_until([&] { return env_->kubectl("get service again-registry", &out) != 0; }, 20s));  // cleaned up
  const auto kept = env_->client().get_if_exists(secrets + "again-secret");
  ASSERT_TRUE(kept.has_value()) << "the Secret went with the job: its checkpoints could not be read again";
  EXPECT_EQ((*kept)["data"]["token"], first["data"]["token"]);

  ASSERT_EQ(env_->apply_yaml(job_yaml("again", two_pool_spec(2, 1, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return env_->get_job("again")["status"].value("phase", "") == "Running"; }, 30s));
  const std::string uid2 = env_->get_job("again")["metadata"]["uid"];
  ASSERT_NE(uid2, uid1);
  ASSERT_TRUE(wait_until([&] {
    return env_->client().get(secrets + "again-secret")["metadata"]["annotations"].value("swarm-operator.io/job-uid", "") == uid2;
  }, 20s));
  const json second = env_->client().get(secrets + "again-secret");
  EXPECT_EQ(second["data"]["token"], first["data"]["token"]) << "the re-created job got a new secret";
  // Every pod of the new job reads that Secret.
  for (const auto& p : env_->pods("swarm-operator.io/job=again,swarm-operator.io/role in (worker,trainer)")) {
    bool reads = false;
    for (const auto& e : p["spec"]["containers"][0].value("env", json::array()))
      if (e.value("name", "") == "SWARM_JOB_SECRET") reads = e["valueFrom"]["secretKeyRef"]["name"] == "again-secret";
    EXPECT_TRUE(reads) << p["metadata"]["name"];
  }
  ASSERT_TRUE(wait_until([&] {
    env_->kubectl("get events --field-selector reason=SecretKept -o jsonpath='{.items[*].message}'", &out);
    return out.find("kept from an earlier job of this name") != std::string::npos;
  }, 10s)) << out;
  // Once: one Event, counted once (a repeat would raise its count).
  env_->kubectl("get events --field-selector reason=SecretKept -o jsonpath='{range .items[*]}{.count}{\"\\n\"}{end}'", &out);
  EXPECT_EQ(out, "1\n") << "SecretKept counts";

  // No checkpoint location: the Secret is the job's and goes with it.
  ASSERT_EQ(env_->apply_yaml(job_yaml("once", "  pipeline: {stages: 2}\n  workers: {perStage: 1}\n"
                                              "  nodePools:\n  - {name: od, nodeSelector: {swarm-operator.io/node-class: on-demand}}\n")),
            0);
  ASSERT_TRUE(wait_until([&] { return env_->client().get_if_exists(secrets + "once-secret").has_value(); }, 20s));
  EXPECT_EQ(env_->client().get(secrets + "once-secret")["metadata"]["ownerReferences"].size(), 1u);
  ASSERT_EQ(env_->kubectl("delete swarmjob once", &out), 0) << out;
  EXPECT_TRUE(wait_until([&] { return !env_->client().get_if_exists(secrets + "once-secret").has_value(); }, 20s));
}

TEST_F(OperatorE2E, ReclaimTaintReplacesWorkersBeforeTheNodeDies) {
  create_standard_nodes(*env_);
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("reclaim", two_pool_spec(2, 2, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "reclaim")) == 4; }, 30s));
  const json victim = live_workers(*env_, "reclaim").front();
  const std::string node = node_of(victim);
  std::set<std::string> before;
  std::multiset<std::string> victim_stages;
  std::vector<std::string> victims;
  for (const auto& p : live_workers(*env_, "reclaim")) {
    before.insert(p["metadata"]["name"]);
    if (node_of(p) == node) {
      victim_stages.insert(label(p, "swarm-operator.io/stage"));
      victims.push_back(p["metadata"]["name"]);
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  env_->add_taint(node, "cloud.google.com/impending-node-termination");
  std::vector<json> replacements;
  ASSERT_TRUE(wait_until([&] {
    replacements.clear();
    for (const auto& p : env_->pods("swarm-operator.io/job=reclaim,swarm-operator.io/role=worker"))
      if (!before.count(p["metadata"]["name"])) replacements.push_back(p);
    return replacements.size() == victims.size();
  }, 10s));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "reclaim notice -> " << victims.size() << " replacement(s) created: " << seconds << " s\n";
  for (const auto& name : victims) {
    const json old_pod = env_->client().get_if_exists("/api/v1/namespaces/default/pods/" + name).value_or(json::object());
    if (!old_pod.empty()) {  // the fake kubelet may already have finished its termination
      EXPECT_TRUE(terminating(old_pod));
      EXPECT_EQ(old_pod["metadata"].value("deletionGracePeriodSeconds", 0), 30);
    }
  }
  std::multiset<std::string> new_stages;
  for (const auto& rep : replacements) {
    new_stages.insert(label(rep, "swarm-operator.io/stage"));
    const auto& terms = rep["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    EXPECT_EQ(terms[0]["matchExpressions"][0]["values"][0], node);
  }
  EXPECT_EQ(new_stages, victim_stages);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "reclaim")) == 4; }, 30s));
  for (const auto& p : live_workers(*env_, "reclaim")) EXPECT_NE(node_of(p), node);
  ASSERT_TRUE(wait_until([&] { return env_->get_job("reclaim")["status"].value("preemptions", 0) >= 1; }, 10s));
  const json status = env_->get_job("reclaim")["status"];
  EXPECT_FALSE(status.value("lastPreemptionTime", "").empty());
  std::string out;
  env_->kubectl("get events --field-selector reason=WorkerReclaimed", &out);
  EXPECT_NE(out.find("GKESpotTermination"), std::string::npos) << out;
  EXPECT_TRUE(wait_until([&] {
    return op.metric("swarm_operator_preemptions_total{pool=\"spot-us\",reason=\"GKESpotTermination\"}") >= 1;
  }, 5s));
}

TEST_F(OperatorE2E, OtherReclaimSignalsNodeDeletionAndNotReady) {
  create_standard_nodes(*env_);
  auto op = env_->start_operator();
  // Once the spot-us nodes are all hit, its replacements overflow to spot-eu after 2 s.
  ASSERT_EQ(env_->apply_yaml(job_yaml("signals", two_pool_spec(3, 2, 6, "  placement: {unschedulableSeconds: 2}\n"))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "signals")) == 6; }, 30s));
  struct Step {
    std::string what;
    std::function<void(const std::string&)> act;
  };
  std::vector<Step> steps = {
      {"karpenter", [&](const std::string& n) { env_->add_taint(n, "karpenter.sh/disrupted"); }},
      {"aws nth", [&](const std::string& n) { env_->add_taint(n, "aws-node-termination-handler/spot-itn"); }},
      {"deleted", [&](const std::string& n) { env_->delete_node(n); }},
      {"not ready", [&](const std::string& n) { env_->set_node_ready(n, false); }},
  };
  std::set<std::string> hit;
  for (const auto& step : steps) {
    // A node that still runs a worker and has not been hit yet.
    std::string node;
    for (const auto& p : live_workers(*env_, "signals"))
      if (!hit.count(node_of(p)) && !node_of(p).empty()) node = node_of(p);
    ASSERT_FALSE(node.empty()) << step.what;
    hit.insert(node);
    step.act(node);
    ASSERT_TRUE(wait_until([&] {
      auto ws = live_workers(*env_, "signals");
      int on_node = 0;
      for (const auto& p : ws) on_node += node_of(p) == node;
      return on_node == 0 && ws.size() == 6u;
    }, 30s)) << step.what;
  }
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "signals")) == 6; }, 30s));
  EXPECT_GE(env_->get_job("signals")["status"].value("preemptions", 0), 4);
}

TEST_F(OperatorE2E, AStageLeftWithoutCapacityTakesAWorkerFromAnother) {
  // Four one-GPU nodes, one pool: 2 stages x 2 workers fill them exactly.
  for (int i = 0; i < 4; ++i) {
    env_->create_node("gpu-" + std::to_string(i), {{"topology.kubernetes.io/region", "r1"},
                                                   {"topology.kubernetes.io/zone", "r1-" + std::to_string(i % 2)}});
    env_->client().patch("/api/v1/nodes/gpu-" + std::to_string(i) + "/status",
                         {{"status", {{"capacity", {{"nvidia.com/gpu", "1"}}}, {"allocatable", {{"nvidia.com/gpu", "1"}}}}}},
                         kube::PatchType::StrategicMerge);
  }
  auto op = env_->start_operator();
  const std::string spec =
      "  pipeline: {stages: 2}\n  workers:\n    perStage: 2\n"
      "    resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}\n"
      "  nodePools:\n  - {name: only, region: r1, maxWorkers: 4}\n";
  ASSERT_EQ(env_->apply_yaml(job_yaml("steal", spec)), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "steal")) == 4; }, 30s));
  // Both stage-0 workers lose their nodes.
  for (const auto& p : live_workers(*env_, "steal"))
    if (label(p, "swarm-operator.io/stage") == "0") env_->delete_node(node_of(p));
  // Stage 0 must be served again, by capacity taken from stage 1.
  ASSERT_TRUE(wait_until([&] {
    int ready0 = 0, ready1 = 0;
    for (const auto& p : live_workers(*env_, "steal")) {
      const int r = count_ready({p});
      (label(p, "swarm-operator.io/stage") == "0" ? ready0 : ready1) += r;
    }
    return ready0 == 1 && ready1 == 1;
  }, 40s));
  EXPECT_TRUE(wait_until([&] { return env_->get_job("steal")["status"].value("stageReassignments", 0) >= 1; }, 10s));
  std::string out;
  EXPECT_TRUE(wait_until([&] {
    env_->kubectl("get events --field-selector reason=StageReassigned", &out);
    return out.find("StageReassigned") != std::string::npos;
  }, 10s)) << out;
}

TEST_F(OperatorE2E, UnschedulablePoolOverflowsToTheNextAndMovesBack) {
  // spot-us (autoscaled: worth waiting for) has no nodes at first: its workers stay unschedulable
  // and move to spot-eu, where surge workers served their stages meanwhile. (A pool that is not
  // autoscaled and has no room is passed over at once: operator_capacity_test.cc.)
  const json spot_taint = json::array({{{"key", "cloud.google.com/gke-spot"}, {"value", "true"}, {"effect", "NoSchedule"}}});
  env_->create_node("eu-spot-0", {{"topology.kubernetes.io/region", "europe-west4"},
                                  {"topology.kubernetes.io/zone", "europe-west4-a"}, {"cloud.google.com/gke-spot", "true"}},
                    spot_taint);
  env_->create_node("us-ondemand-0", {{"topology.kubernetes.io/region", "us-central1"},
                                      {"swarm-operator.io/node-class", "on-demand"}});
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("overflow", two_pool_spec(2, 1, 4, "  placement: {unschedulableSeconds: 2, retryPoolSeconds: 4}\n",
                                                                 "    autoscaled: true\n"))), 0);
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "overflow");
    if (count_ready(ws) != 2) return false;
    for (const auto& p : ws)
      if (label(p, "swarm-operator.io/pool") != "spot-eu") return false;
    return true;
  }, 40s));
  // The status write follows the deletions in the same reconcile: wait for it.
  json status;
  EXPECT_TRUE(wait_until([&] {
    status = env_->get_job("overflow")["status"];
    for (const auto& p : status["pools"])
      if (p["name"] == "spot-us") return !p.value("available", true);
    return false;
  }, 10s)) << status.dump(2);
  std::string out;
  env_->kubectl("get events --field-selector reason=PoolOverflow", &out);
  EXPECT_NE(out.find("spot-us"), std::string::npos) << out;

  // Capacity returns in us-central1: after retryPoolSeconds the workers move back.
  env_->create_node("us-spot-a0", {{"topology.kubernetes.io/region", "us-central1"},
                                   {"topology.kubernetes.io/zone", "us-central1-a"}, {"cloud.google.com/gke-spot", "true"}},
                    spot_taint);
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "overflow");
    if (ws.size() != 2 || count_ready(ws) != 2) return false;
    for (const auto& p : ws)
      if (label(p, "swarm-operator.io/pool") != "spot-us") return false;
    return true;
  }, 60s));
  status = env_->get_job("overflow")["status"];
  for (const auto& p : status["pools"]) EXPECT_TRUE(p.value("available", false)) << status.dump(2);
}

// The restricted Pod Security Standard, enforced by the API server's own PodSecurity admission on
// the job's namespace: it refuses a plain pod, and admits every pod the operator makes for a job
// (workers with a checkpoint path, trainer, registry), so none of them breaks the standard.
TEST_F(OperatorE2E, RestrictedPodSecurityAdmitsEveryPodOfAJob) {
  create_standard_nodes(*env_);
  std::string out;
  ASSERT_EQ(env_->apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: locked\n  labels:\n"
                             "    pod-security.kubernetes.io/enforce: restricted\n"
                             "    pod-security.kubernetes.io/enforce-version: latest\n", &out), 0) << out;
  // The admission is on: a pod without the restricted settings is refused.
  EXPECT_NE(env_->apply_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: plain, namespace: locked}\n"
                             "spec: {containers: [{name: c, image: busybox}]}\n", &out), 0) << out;
  EXPECT_NE(out.find("violate"), std::string::npos) << out;

  auto op = env_->start_operator();
  std::string job = job_yaml("locked-lm", two_pool_spec(2, 1, 4));
  job.replace(job.find("  name: locked-lm\n"), 18, "  name: locked-lm\n  namespace: locked\n");
  ASSERT_EQ(env_->apply_yaml(job, &out), 0) << out;
  const std::string sel = "swarm-operator.io/job=locked-lm";
  ASSERT_TRUE(wait_until([&] { return env_->pods(sel + ",swarm-operator.io/role=worker").size() == 2; }, 40s))
      << tail(read_text(env_->dir() + "/op-1.log"), 40);
  ASSERT_TRUE(wait_until([&] { return env_->pods(sel + ",swarm-operator.io/role=trainer").size() == 1; }, 20s));
  ASSERT_TRUE(wait_until([&] { return env_->pods(sel + ",swarm-operator.io/role=registry").size() == 1; }, 20s));
  for (const auto& p : env_->pods(sel)) {
    EXPECT_EQ(p["metadata"]["namespace"], "locked");
    EXPECT_EQ(p["spec"]["automountServiceAccountToken"], false) << p["metadata"]["name"];
    EXPECT_EQ(p["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"], true) << p["metadata"]["name"];
  }
  // No pod creation was refused along the way.
  EXPECT_EQ(read_text(env_->dir() + "/op-1.log").find("violates PodSecurity"), std::string::npos);
}

// --network-policies: each job gets a NetworkPolicy <job>-swarm, stored by the API server (so its
// schema is valid), updated when the operator restarts with another monitoring namespace, and
// removed when the job is deleted (by the operator: this control plane has no garbage collector).
// Without the flag the operator makes none and leaves a user's policy of that name alone.
TEST_F(OperatorE2E, NetworkPoliciesAreOptInAndFollowTheJob) {
  create_standard_nodes(*env_);
  const std::string policies = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
  auto policy_names = [&] {
    std::set<std::string> names;
    for (const auto& p : env_->client().get(policies).value("items", json::array())) names.insert(p["metadata"]["name"]);
    return names;
  };
  // A user's own policy under the name the operator would use.
  const json mine = env_->client().create(
      policies, {{"apiVersion", "networking.k8s.io/v1"}, {"kind", "NetworkPolicy"},
                 {"metadata", {{"name", "plain-swarm"}}},
                 {"spec", {{"podSelector", json::object()}, {"ingress", json::array({json::object()})}}}});
  std::string out;

  // Off (the default).
  {
    auto op = env_->start_operator();
    ASSERT_EQ(env_->apply_yaml(job_yaml("plain", two_pool_spec(2, 1, 4))), 0);
    ASSERT_TRUE(wait_until([&] { return env_->get_job("plain")["status"].value("phase", "") == "Running"; }, 30s));
    EXPECT_EQ(policy_names(), std::set<std::string>{"plain-swarm"});
    ASSERT_EQ(env_->kubectl("delete swarmjob plain", &out), 0) << out;
    ASSERT_TRUE(wait_until([&] { return env_->kubectl("get service plain-registry", &out) != 0; }, 20s));  // cleaned up
    const json still = env_->client().get(policies + "/plain-swarm");
    EXPECT_EQ(still["metadata"]["resourceVersion"], mine["metadata"]["resourceVersion"]);
    op.proc.stop();
  }

  // On: the policy as the API server stored it.
  auto namespace_of = [](const json& rule) -> std::string {
    return rule["from"][0]["namespaceSelector"]["matchLabels"].value("kubernetes.io/metadata.name", "");
  };
  auto ports_of = [](const json& rule) {
    std::set<int> out;
    for (const auto& p : rule["ports"]) out.insert(p["port"].get<int>());
    return out;
  };
  {
    auto op = env_->start_operator(
        {"--network-policies", "--monitoring-namespace", "prom", "--operator-namespace", "swarm-system"});
    ASSERT_EQ(env_->apply_yaml(job_yaml("fenced", two_pool_spec(2, 1, 4))), 0);
    std::optional<json> np;
    ASSERT_TRUE(wait_until([&] { return (np = env_->client().get_if_exists(policies + "/fenced-swarm")).has_value(); }, 30s));
    const json job = env_->get_job("fenced");
    EXPECT_EQ((*np)["metadata"]["ownerReferences"][0]["uid"], job["metadata"]["uid"]);
    EXPECT_EQ((*np)["metadata"]["labels"]["app.kubernetes.io/managed-by"], "swarm-operator");
    const json& spec = (*np)["spec"];
    EXPECT_EQ(spec["podSelector"]["matchLabels"], json({{"swarm-operator.io/job", "fenced"}}));
    EXPECT_EQ(spec["policyTypes"], json::array({"Ingress"}));
    ASSERT_EQ(spec["ingress"].size(), 3u) << spec.dump(2);
    EXPECT_EQ(spec["ingress"][0]["from"][0]["podSelector"], spec["podSelector"]);
    EXPECT_EQ(ports_of(spec["ingress"][0]), (std::set<int>{7400, 7500, 9400}));
    EXPECT_EQ(namespace_of(spec["ingress"][1]), "prom");
    EXPECT_EQ(ports_of(spec["ingress"][1]), (std::set<int>{7400, 9400}));
    EXPECT_EQ(namespace_of(spec["ingress"][2]), "swarm-system");
    EXPECT_EQ(ports_of(spec["ingress"][2]), (std::set<int>{7400}));
    // The policy selects every pod of the job.
    ASSERT_TRUE(wait_until([&] { return env_->pods("swarm-operator.io/job=fenced").size() == 4u; }, 20s));
    EXPECT_EQ(policy_names(), (std::set<std::string>{"plain-swarm", "fenced-swarm"}));
    op.proc.stop();
  }

  // Restarted with the monitoring namespace its own (the operator's namespace defaults to the
  // Lease's, here the kubeconfig's "default"): the policy is updated, one rule for both.
  auto op = env_->start_operator({"--network-policies", "--monitoring-namespace", "default"});
  json spec;
  ASSERT_TRUE(wait_until([&] {
    spec = env_->client().get(policies + "/fenced-swarm")["spec"];
    return spec["ingress"].size() == 2u;
  }, 30s)) << spec.dump(2);
  EXPECT_EQ(namespace_of(spec["ingress"][1]), "default");
  EXPECT_EQ(ports_of(spec["ingress"][1]), (std::set<int>{7400, 9400}));

  // The job deleted: its policy goes, the user's stays.
  ASSERT_EQ(env_->kubectl("delete swarmjob fenced", &out), 0) << out;
  EXPECT_TRUE(wait_until([&] { return policy_names() == std::set<std::string>{"plain-swarm"}; }, 20s));
  EXPECT_EQ(env_->client().get(policies + "/plain-swarm")["metadata"]["resourceVersion"],
            mine["metadata"]["resourceVersion"]);
}

// An object-storage job (spec.checkpoint.path s3://..., credentialsSecret): its worker and trainer
// pods, as the API server stored them, take the object store's keys from the Secret and mount no
// checkpoint folder; when trainer 0 ends with its export in its termination message (the fake
// kubelet stopped, the pod's status written as a kubelet would), status.exportedModel says where
// the model is, with a ModelExported Event, and the finished trainer is not replaced.
TEST_F(OperatorE2E, ObjectStorageJobGetsItsCredentialsAndReportsTheExport) {
  create_standard_nodes(*env_);
  std::string out;
  ASSERT_EQ(env_->kubectl("create secret generic minio-creds --from-literal=AWS_ACCESS_KEY_ID=minio "
                          "--from-literal=AWS_SECRET_ACCESS_KEY=minio-secret", &out), 0) << out;
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("s3-lm", "  pipeline: {stages: 2}\n  checkpoint:\n    path: s3://ckpts/runs\n"
                                               "    s3: {endpoint: \"http://minio.storage:9000\", credentialsSecret: minio-creds}\n"),
                             &out), 0) << out;
  ASSERT_TRUE(wait_until([&] { return env_->get_job("s3-lm")["status"].value("phase", "") == "Running"; }, 30s));
  const std::string sel = "swarm-operator.io/job=s3-lm";
  std::vector<json> pods = env_->pods(sel + ",swarm-operator.io/role=worker");
  const std::vector<json> trainers = env_->pods(sel + ",swarm-operator.io/role=trainer");
  ASSERT_EQ(trainers.size(), 1u);
  pods.push_back(trainers[0]);
  for (const auto& p : pods) {
    SCOPED_TRACE(p["metadata"]["name"].get<std::string>());
    std::map<std::string, json> refs;
    for (const auto& e : p["spec"]["containers"][0]["env"])
      if (e.contains("valueFrom") && e["valueFrom"].contains("secretKeyRef")) refs[e["name"]] = e["valueFrom"]["secretKeyRef"];
    EXPECT_EQ(refs["AWS_ACCESS_KEY_ID"], (json{{"name", "minio-creds"}, {"key", "AWS_ACCESS_KEY_ID"}}));
    EXPECT_EQ(refs["AWS_SECRET_ACCESS_KEY"], (json{{"name", "minio-creds"}, {"key", "AWS_SECRET_ACCESS_KEY"}}));
    EXPECT_EQ(refs["AWS_SESSION_TOKEN"], (json{{"name", "minio-creds"}, {"key", "AWS_SESSION_TOKEN"}, {"optional", true}}));
    for (const auto& v : p["spec"]["volumes"]) EXPECT_NE(v["name"], "checkpoints") << v.dump();
  }
  const json cm = env_->client().get("/api/v1/namespaces/default/configmaps/s3-lm-spec");
  EXPECT_NE(cm["data"]["job.yaml"].get<std::string>().find("s3://ckpts/runs/s3-lm"), std::string::npos);

  env_->stop_fake_kubelet();
  const std::string now = kube::format_time(std::chrono::system_clock::now());
  const std::string location = "s3://ckpts/runs/s3-lm/export/model.safetensors";
  const json terminated = {{"exitCode", 0}, {"reason", "Completed"}, {"startedAt", now}, {"finishedAt", now},
                           {"message", R"({"exportedModel":")" + location + R"(","step":300})"}};
  const json status = {{"phase", "Succeeded"},
                       {"containerStatuses", json::array({{{"name", "trainer"}, {"image", trainers[0]["spec"]["containers"][0]["image"]},
                                                           {"imageID", ""}, {"ready", false}, {"restartCount", 0},
                                                           {"state", {{"terminated", terminated}}}}})}};
  env_->client().patch("/api/v1/namespaces/default/pods/" + trainers[0]["metadata"]["name"].get<std::string>() + "/status",
                       {{"status", status}}, kube::PatchType::StrategicMerge);
  json job;
  ASSERT_TRUE(wait_until([&] {
    job = env_->get_job("s3-lm");
    return job["status"].value("exportedModel", "") == location;
  }, 20s)) << job["status"].dump(2);
  EXPECT_EQ(job["status"]["exportedStep"], 300);
  auto exported_events = [&] {
    int n = 0;
    for (const auto& e : env_->client().get("/api/v1/namespaces/default/events").value("items", json::array()))
      if (e.value("reason", "") == "ModelExported" && e["involvedObject"].value("name", "") == "s3-lm") ++n;
    return n;
  };
  EXPECT_TRUE(wait_until([&] { return exported_events() == 1; }, 10s));
  EXPECT_EQ(env_->pods(sel + ",swarm-operator.io/role=trainer").size(), 1u) << "a finished trainer is not replaced";
}

}  // namespace
}  // namespace swarm::optest
