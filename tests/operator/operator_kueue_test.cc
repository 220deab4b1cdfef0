// SwarmJobs through a real Kueue v0.17.0 (tests/operator/kueue_env.h: the controller manager as a
// process, its webhooks routed to it) on a real API server, with the operator run with --kueue:
// admission -> pods on the flavor's nodes; a higher-priority job preempts -> the low one drains in
// order and its quota is given back only once its pods are gone; the high one finishes -> the low
// one is admitted again and runs. Also: the operator killed between the eviction and the drain's end
// completes it when restarted. Prints the timings it measures.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include "tests/operator/fixtures.h"
#include "tests/operator/kueue_env.h"

namespace swarm::optest {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kWorkloads = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads";

std::string queue_objects() {
  return R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {swarm-operator.io/node-class: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: "10"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
)";
}

// low: 2 stages, 1 worker each from the core (2 cpu each) and 1 more each from its extension;
// trainer 1 cpu: core 5 cpu, extension 4 of the queue's 10. high: 3 stages x 2 workers of 1 cpu and
// a trainer: 7 cpu, so both of low's Workloads must go.
std::string job(const std::string& name, const std::string& priority, int stages, int per_stage, int max,
                const std::string& worker_cpu) {
  return "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: " + name +
         "\n  labels: {kueue.x-k8s.io/queue-name: lq, kueue.x-k8s.io/priority-class: " + priority +
         "}\nspec:\n  pipeline: {stages: " + std::to_string(stages) + "}\n  workers: {perStage: " +
         std::to_string(per_stage) + ", minPerStage: " + std::to_string(per_stage) +
         ", maxPerStage: " + std::to_string(max) + ", resources: {requests: {cpu: \"" + worker_cpu +
         "\"}}}\n  trainers: {count: 1, resources: {requests: {cpu: \"1\"}}}\n  checkpoint: {path: /checkpoints}\n";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class OperatorKueue : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<TestEnv>(kueue_apiserver_args());
    env_->start_fake_kubelet();
    env_->create_node("od-0", {{"swarm-operator.io/node-class", "on-demand"}});
    kueue_ = std::make_unique<KueueEnv>(*env_);
    std::printf("[kueue] webhooks answering %.1f s after the process started\n", kueue_->ready_seconds());
    std::string out;
    ASSERT_EQ(env_->apply_yaml(queue_objects(), &out), 0) << out;
  }
  void TearDown() override {
    if (HasFailure()) {
      std::string out;
      env_->kubectl("get pods,workloads -o wide", &out);
      std::cerr << out;
      if (kueue_) std::cerr << "--- kueue\n" << kueue_->log_tail(40);
      for (int i = 1; i <= 2; ++i) std::cerr << tail(read_text(env_->dir() + "/op-" + std::to_string(i) + ".log"), 40);
    }
    kueue_.reset();
    env_.reset();
  }

  std::optional<json> workload(const std::string& name) { return env_->client().get_if_exists(kWorkloads + "/" + name); }
  static bool condition(const std::optional<json>& w, const std::string& type) {
    if (!w) return false;
    for (const auto& c : (*w).value("status", json::object()).value("conditions", json::array()))
      if (c.value("type", "") == type) return c.value("status", "") == "True";
    return false;
  }
  static bool has_admission(const std::optional<json>& w) {
    return w && (*w).value("status", json::object()).contains("admission");
  }
  std::vector<json> pods_of(const std::string& job, const std::string& role = "") {
    return env_->pods("swarm-operator.io/job=" + job + (role.empty() ? "" : ",swarm-operator.io/role=" + role));
  }
  std::string phase(const std::string& job) { return env_->get_job(job).value("status", json::object()).value("phase", ""); }

  // Low admitted (core and extension), its pods on the flavor's node, running.
  void start_low() {
    ASSERT_EQ(env_->apply_yaml(job("low", "low", 2, 1, 2, "2")), 0);
    const auto t0 = Clock::now();
    double admitted = -1, first_pod = -1;
    ASSERT_TRUE(wait_until([&] {
      if (admitted < 0 && condition(workload("low-core"), "Admitted")) admitted = seconds_since(t0);
      if (first_pod < 0 && !pods_of("low").empty()) first_pod = seconds_since(t0);
      return admitted >= 0 && first_pod >= 0;
    }, 60s));
    std::printf("[kueue] low: applied -> core Admitted %.2f s, -> first pod %.2f s\n", admitted, first_pod);
    ASSERT_TRUE(wait_until([&] { return condition(workload("low-ext"), "Admitted"); }, 30s));
    ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "low")) == 4 && phase("low") == "Running"; }, 60s));
  }

  // What the test sees, every 20 ms, from high's arrival until high has a pod and low's admission
  // is cleared: when (seconds after the start), and whether the rules held throughout.
  struct Preemption {
    double evicted = -1, gone = -1, cleared = -1, high_admitted = -1, high_pod = -1;
    bool draining_seen = false, order_ok = true, early_release = false;
  };
  Preemption watch_preemption() {
    Preemption r;
    const auto t0 = Clock::now();
    wait_until([&] {
      const auto w = workload("low-core");
      const auto low_pods = pods_of("low");
      if (r.evicted < 0 && condition(w, "Evicted")) r.evicted = seconds_since(t0);
      if (r.gone < 0 && r.evicted >= 0 && low_pods.empty()) r.gone = seconds_since(t0);
      if (r.evicted >= 0 && !has_admission(w)) {
        if (!low_pods.empty()) r.early_release = true;  // quota given back while a pod is left
        if (r.cleared < 0) r.cleared = seconds_since(t0);
      }
      // The drain's order: none of the core's 2 workers goes while a trainer is left (the
      // extension's 2, evicted first, retire while low still trains: that is no drain), no
      // registry while a worker is.
      int trainers = 0, workers = 0, going_workers = 0, going_registries = 0;
      for (const auto& p : low_pods) {
        const std::string role = label(p, "swarm-operator.io/role");
        trainers += role == "trainer";
        workers += role == "worker";
        going_workers += role == "worker" && terminating(p);
        going_registries += role == "registry" && terminating(p);
      }
      if ((going_workers > 2 && trainers > 0) || (going_registries > 0 && workers > 0)) r.order_ok = false;
      r.draining_seen |= phase("low") == "Draining";
      if (r.high_admitted < 0 && condition(workload("high-core"), "Admitted")) r.high_admitted = seconds_since(t0);
      if (r.high_pod < 0 && !pods_of("high").empty()) r.high_pod = seconds_since(t0);
      return r.high_pod >= 0 && r.cleared >= 0;
    }, 90s);
    return r;
  }

  std::unique_ptr<TestEnv> env_;
  std::unique_ptr<KueueEnv> kueue_;
};

TEST_F(OperatorKueue, AdmittedRunsOnTheFlavorPreemptedDrainsBeforeItsQuotaGoesAndResumes) {
  // examples/kueue/ as Kueue's CRDs and webhooks and the SwarmJob CRD check them (its namespaces
  // made for real: a dry run cannot place objects in a namespace it only pretends to make).
  std::string out;
  ASSERT_EQ(env_->kubectl("create namespace team-a", &out), 0) << out;
  ASSERT_EQ(env_->kubectl("create namespace team-b", &out), 0) << out;
  const std::string examples = std::string(SWARM_SOURCE_DIR) + "/examples/kueue/";
  EXPECT_EQ(env_->kubectl("apply --dry-run=server -f " + examples + "queues.yaml -f " + examples + "low-job.yaml -f " +
                              examples + "high-job.yaml", &out), 0) << out;

  auto op = env_->start_operator({"--kueue"});
  start_low();
  const json core = *workload("low-core");
  EXPECT_EQ(core["metadata"]["finalizers"], json::array({"kueue.x-k8s.io/resource-in-use"}));
  EXPECT_EQ(core["metadata"]["ownerReferences"][0]["kind"], "SwarmJob");
  EXPECT_EQ(core["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(core["spec"]["priority"], 10);
  EXPECT_EQ(core["spec"]["priorityClassRef"]["name"], "low");
  EXPECT_EQ((*workload("low-ext"))["spec"]["priority"], 9);
  for (const auto& p : pods_of("low", "worker"))
    EXPECT_EQ(p["spec"]["nodeSelector"]["swarm-operator.io/node-class"], "on-demand") << p["metadata"]["name"];
  for (const auto& p : pods_of("low", "trainer"))
    EXPECT_EQ(p["spec"]["nodeSelector"]["swarm-operator.io/node-class"], "on-demand");
  const json low = env_->get_job("low");
  EXPECT_FALSE(low["spec"].value("suspend", true));
  EXPECT_EQ(low["status"]["queue"]["clusterQueue"], "cq");
  EXPECT_EQ(low["status"]["queue"]["admittedWorkers"], 4);

  // high preempts both of low's Workloads.
  ASSERT_EQ(env_->apply_yaml(job("high", "high", 3, 2, 2, "1")), 0);
  const Preemption p = watch_preemption();
  std::printf("[kueue] high applied -> low evicted %.2f s -> low's pods all gone %.2f s -> low's admission cleared "
              "%.2f s -> high Admitted %.2f s -> high's first pod %.2f s\n",
              p.evicted, p.gone, p.cleared, p.high_admitted, p.high_pod);
  ASSERT_GE(p.high_pod, 0) << "high never got a pod";
  EXPECT_FALSE(p.early_release) << "low's quota was given back while its pods were still there";
  EXPECT_TRUE(p.order_ok) << "drain out of order";
  EXPECT_TRUE(p.draining_seen);
  EXPECT_LE(p.gone, p.cleared);
  const json drained = env_->get_job("low");
  EXPECT_TRUE(drained["spec"].value("suspend", false));
  EXPECT_EQ(drained["status"]["queue"]["evictions"], 1);
  EXPECT_EQ(drained["status"]["queue"]["lastEviction"]["reason"], "Preempted");
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "high")) == 6 && phase("high") == "Running"; }, 60s));
  EXPECT_EQ(phase("low"), "Queued");

  // high's training ends (its trainer Succeeded): high drains, its Workload Finished, low resumes.
  // The exit is written until the job sees it, as a kubelet keeps reporting it: the fake kubelet
  // marks a pod Running from a listing it may have read before this write (once under ctest -j 2
  // load the trainer stayed Running and high never finished).
  const auto trainers_succeed = [&] {
    for (auto& p : pods_of("high", "trainer"))
      if (p["status"].value("phase", "") != "Succeeded" && !p["metadata"].contains("deletionTimestamp")) try {
          env_->client().patch("/api/v1/namespaces/default/pods/" + p["metadata"]["name"].get<std::string>() + "/status",
                               {{"status", {{"phase", "Succeeded"}}}}, kube::PatchType::StrategicMerge);
        } catch (const std::exception&) {  // deleted since the listing: the next pass sees it gone
        }
  };
  trainers_succeed();
  const auto t1 = Clock::now();
  ASSERT_TRUE(wait_until([&] {
    if (phase("high") != "Finished") trainers_succeed();
    return condition(workload("high-core"), "Finished") && phase("high") == "Finished";
  }, 60s));
  double readmitted = -1;
  ASSERT_TRUE(wait_until([&] {
    if (readmitted < 0 && condition(workload("low-core"), "Admitted")) readmitted = seconds_since(t1);
    return count_ready(live_workers(*env_, "low")) >= 2 && phase("low") == "Running";
  }, 90s));
  std::printf("[kueue] high's trainer Succeeded -> low Admitted again %.2f s -> low Running %.2f s\n", readmitted,
              seconds_since(t1));
  EXPECT_TRUE(live_workers(*env_, "high").empty());
  EXPECT_TRUE((*workload("high-core"))["metadata"].value("finalizers", json::array()).empty());
  EXPECT_EQ(env_->get_job("low")["status"]["queue"]["evictions"], 1);

  // Deleted: its Workloads lose the finalizer and go.
  env_->client().remove("/apis/swarm-operator.io/v1alpha1/namespaces/default/swarmjobs/low");
  ASSERT_TRUE(wait_until([&] { return !workload("low-core") && !workload("low-ext"); }, 30s));
}

TEST_F(OperatorKueue, AnOperatorKilledMidEvictionCompletesTheDrainWhenRestarted) {
  auto op = env_->start_operator({"--kueue"});
  start_low();
  ASSERT_EQ(env_->apply_yaml(job("high", "high", 3, 2, 2, "1")), 0);
  ASSERT_TRUE(wait_until([&] { return condition(workload("low-core"), "Evicted"); }, 60s));
  op.proc.signal(SIGKILL);
  op.proc.stop();
  // Nobody finishes the drain now: the quota stays held while low's pods are there.
  std::this_thread::sleep_for(3s);
  ASSERT_FALSE(pods_of("low").empty());
  EXPECT_TRUE(has_admission(workload("low-core")));
  EXPECT_FALSE(condition(workload("high-core"), "Admitted"));

  auto op2 = env_->start_operator({"--kueue"});
  const auto t0 = Clock::now();
  bool early_release = false;
  ASSERT_TRUE(wait_until([&] {
    const bool left = !pods_of("low").empty();
    if (left && !has_admission(workload("low-core"))) early_release = true;
    return !left && condition(workload("high-core"), "Admitted");
  }, 90s));
  std::printf("[kueue] restarted operator -> low drained, quota given back, high Admitted: %.2f s\n", seconds_since(t0));
  EXPECT_FALSE(early_release);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "high")) == 6; }, 60s));
  EXPECT_EQ(env_->get_job("low")["status"]["queue"]["evictions"], 1);
}

}  // namespace
}  // namespace swarm::optest
