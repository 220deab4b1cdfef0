// Placement that sees capacity, against a real API server and scheduler: nodes lost in bulk,
// a whole pool gone, a pool at capacity (held by someone else's pods), an autoscaled pool whose
// node comes later, and a node cordoned without a notice. unschedulableSeconds stays at 60 s
// (120 s for the autoscaled pool) in every test: the replacements must find room without it.
#include <gtest/gtest.h>

#include <sstream>

#include "tests/operator/capacity_fixture.h"

namespace swarm::optest {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class OperatorCapacity : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<TestEnv>();
    env_->start_fake_kubelet();
  }
  void TearDown() override {
    if (HasFailure() && env_) {  // null when the control plane did not start
      std::string out;
      env_->kubectl("get pods -o wide", &out);
      std::cerr << out << "\n" << tail(read_text(env_->dir() + "/op-1.log"), 60) << "\n";
    }
    env_.reset();
  }
  std::set<std::string> worker_names(const std::string& job) {
    std::set<std::string> names;
    for (const auto& p : live_workers(*env_, job)) names.insert(p["metadata"]["name"]);
    return names;
  }
  json pool_status(const std::string& job, const std::string& pool) {
    for (const auto& p : env_->get_job(job)["status"].value("pools", json::array()))
      if (p.value("name", "") == pool) return p;
    return json::object();
  }
  std::string events(const std::string& reason) {
    std::string out;
    env_->kubectl("get events --field-selector reason=" + reason + " -o jsonpath='{range .items[*]}{.message}{\"\\n\"}{end}'", &out);
    return out;
  }
  // The operator's swarm_operator_reconciles_total, summed over results (-1 when unreadable).
  static double reconciles(int metrics_port) {
    std::string out;
    if (run_command("curl -sf http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics", &out) != 0) return -1;
    double sum = 0;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("swarm_operator_reconciles_total", 0) == 0) sum += std::stod(line.substr(line.rfind(' ') + 1));
    return sum;
  }
  std::unique_ptr<TestEnv> env_;
};

TEST_F(OperatorCapacity, HalfTheNodesDeletedAtOnceAreReplacedWhereCapacityIsNotAfterATimer) {
  create_seven_nodes(*env_);
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("mass", gpu_spec(3, 2, 3, 4, "  placement: {unschedulableSeconds: 60}\n"))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "mass")) == 6; }, 60s));
  // A Karpenter disruption on the us node with the fewest workers: handled, then settled.
  std::map<std::string, int> per_node;
  for (const char* n : {"us-0", "us-1", "us-2"}) per_node[n] = 0;
  for (const auto& p : live_workers(*env_, "mass"))
    if (per_node.count(node_of(p))) ++per_node[node_of(p)];  // us nodes only: the taint must land in spot-us
  std::string tainted = "us-0";
  for (const auto& [n, c] : per_node)
    if (c < per_node[tainted]) tainted = n;
  env_->add_taint(tainted, "karpenter.sh/disrupted");
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "mass");
    if (ws.size() != 6 || count_ready(ws) != 6) return false;
    for (const auto& p : ws)
      if (node_of(p) == tainted) return false;
    return true;
  }, 60s));
  // Then the other two us nodes and the eu node with the most workers go at once.
  std::map<std::string, int> eu;
  for (const auto& p : live_workers(*env_, "mass"))
    if (pool_of(p) == "spot-eu") ++eu[node_of(p)];
  std::string eu_victim = "eu-0";
  for (const auto& [n, c] : eu)
    if (c > eu[eu_victim]) eu_victim = n;
  std::vector<std::string> victims = {eu_victim};
  for (const char* n : {"us-0", "us-1", "us-2"})
    if (n != tainted) victims.push_back(n);
  const auto before = worker_names("mass");
  StageMonitor monitor(*env_, "mass", 3);
  monitor.reset();
  const auto t0 = Clock::now();
  for (const auto& n : victims) env_->delete_node(n);
  const std::set<std::string> gone(victims.begin(), victims.end());
  ASSERT_TRUE(wait_until([&] { return ready_off(*env_, "mass", 6, gone); }, 45s));
  const double all_ready = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(monitor.await_samples(2));
  monitor.stop();
  std::cerr << "3 of 7 nodes deleted: all 6 workers ready after " << all_ready << " s; stage-unserved "
            << monitor.under_seconds() << " s (summed over stages)\n";
  // Not one replacement went to spot-us (its only node is under a notice): none waited for a timer.
  int replacements = 0;
  for (const auto& p : live_workers(*env_, "mass")) {
    if (before.count(p["metadata"]["name"])) continue;
    ++replacements;
    EXPECT_NE(pool_of(p), "spot-us") << p["metadata"]["name"];
    EXPECT_NE(node_of(p), tainted);
  }
  EXPECT_GE(replacements, 1);
  EXPECT_LT(all_ready, 30.0) << "well below unschedulableSeconds (60 s)";
  for (const auto& p : env_->get_job("mass")["status"]["pools"]) EXPECT_TRUE(p.value("available", false)) << p.dump();
  const json us = pool_status("mass", "spot-us");
  EXPECT_EQ(us.value("freeSlots", -1), 0) << us.dump();
  EXPECT_EQ(us.value("nodesUnderNotice", -1), 1) << us.dump();
  EXPECT_TRUE(wait_until([&] { return events("WorkerCreated").find("spot-us: no free slot") != std::string::npos; }, 10s))
      << events("WorkerCreated");
  EXPECT_TRUE(wait_until([&] { return !events("PoolCapacity").empty(); }, 10s));
}

TEST_F(OperatorCapacity, EveryNodeOfOnePoolDeleted) {
  create_seven_nodes(*env_);
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("pool-gone", gpu_spec(3, 2, 3, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "pool-gone")) == 6; }, 60s));
  const auto before = worker_names("pool-gone");
  const auto t0 = Clock::now();
  for (const char* n : {"us-0", "us-1", "us-2"}) env_->delete_node(n);
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "pool-gone");
    if (ws.size() != 6 || count_ready(ws) != 6) return false;
    for (const auto& p : ws)
      if (pool_of(p) == "spot-us") return false;
    return true;
  }, 45s));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "spot-us lost every node: 6 ready outside it after " << seconds << " s\n";
  EXPECT_LT(seconds, 30.0);
  // spot-eu (6 GPUs, 2 taken) holds the 4 replacements: none needed on-demand.
  int eu = 0;
  for (const auto& p : live_workers(*env_, "pool-gone")) eu += pool_of(p) == "spot-eu";
  EXPECT_EQ(eu, 6);
  const json us = pool_status("pool-gone", "spot-us");
  EXPECT_EQ(us.value("nodes", -1), 0) << us.dump();
  EXPECT_EQ(us.value("freeSlots", -1), 0) << us.dump();
  EXPECT_TRUE(wait_until([&] { return pool_status("pool-gone", "spot-eu").value("freeSlots", -1) == 0; }, 10s))
      << pool_status("pool-gone", "spot-eu").dump();
}

TEST_F(OperatorCapacity, APoolAtCapacityIsPassedOverAtOnce) {
  // spot-us: 2 nodes (4 GPUs) for 4 workers; spot-eu's GPUs all held by someone else's pods.
  spot_node(*env_, "us-0", "us-central1", "us-central1-a");
  spot_node(*env_, "us-1", "us-central1", "us-central1-b");
  spot_node(*env_, "eu-0", "europe-west4", "europe-west4-a");
  spot_node(*env_, "eu-1", "europe-west4", "europe-west4-b");
  on_demand_node(*env_, "od-0");
  foreign_gpu_pod(*env_, "other-0", "eu-0", 2);
  foreign_gpu_pod(*env_, "other-1", "eu-1", 2);
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("full", gpu_spec(2, 2, 3, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "full")) == 4; }, 60s));
  for (const auto& p : live_workers(*env_, "full")) ASSERT_EQ(pool_of(p), "spot-us");
  ASSERT_TRUE(wait_until([&] { return pool_status("full", "spot-eu").value("usedSlots", -1) == 4; }, 10s))
      << pool_status("full", "spot-eu").dump();
  const auto before = worker_names("full");
  const auto t0 = Clock::now();
  env_->delete_node("us-0");
  ASSERT_TRUE(wait_until([&] { return ready_off(*env_, "full", 4, {"us-0"}); }, 45s));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "spot-us node lost, spot-eu full: replacements ready on-demand after " << seconds << " s\n";
  EXPECT_LT(seconds, 30.0);
  for (const auto& p : live_workers(*env_, "full")) {
    if (!before.count(p["metadata"]["name"])) {
      EXPECT_EQ(pool_of(p), "on-demand") << p["metadata"]["name"];
    }
  }
  EXPECT_NE(events("WorkerCreated").find("spot-eu: no free slot"), std::string::npos) << events("WorkerCreated");
  EXPECT_EQ(pool_status("full", "spot-eu").value("freeSlots", -1), 0);
}

TEST_F(OperatorCapacity, AnAutoscaledPoolGrowsWhileSurgeWorkersServeItsStages) {
  // "auto" (an autoscaled pool, preferred) has one node; spot-eu has room.
  spot_node(*env_, "us-0", "us-central1", "us-central1-a");
  spot_node(*env_, "eu-0", "europe-west4", "europe-west4-a");
  spot_node(*env_, "eu-1", "europe-west4", "europe-west4-b");
  on_demand_node(*env_, "od-0", 0);
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("grow", gpu_spec(2, 1, 2, 4, "  placement: {unschedulableSeconds: 120}\n",
                                                       "    autoscaled: true\n"))),
            0);
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "grow");
    if (ws.size() != 2 || count_ready(ws) != 2) return false;
    for (const auto& p : ws)
      if (pool_of(p) != "spot-us") return false;
    return true;
  }, 60s));
  StageMonitor monitor(*env_, "grow", 2);
  monitor.reset();
  env_->delete_node("us-0");
  // The replacements wait in spot-us (its autoscaler is asked for a node); surge workers from
  // spot-eu serve both stages meanwhile.
  ASSERT_TRUE(wait_until([&] {
    auto ready = ready_by_stage(*env_, "grow", 2);
    int waiting_in_us = 0;
    for (const auto& p : live_workers(*env_, "grow")) waiting_in_us += pool_of(p) == "spot-us" && node_of(p).empty();
    return ready[0] >= 1 && ready[1] >= 1 && waiting_in_us == 2;
  }, 20s));
  ASSERT_TRUE(monitor.await_samples(2));  // a sample of the state just seen is counted
  const double recovered = monitor.under_seconds();
  // While the autoscaler takes its time, every pass of the operator over the job keeps the
  // replacements waiting and the surge serving. (How long they may wait, unschedulableSeconds, is
  // the planner's decision on an injected clock, in tests/planner: PlacementCapacity.
  // AnAutoscaledPoolKeepsItsReplacementWhileASurgeWorkerServes.) Three passes, each made to happen
  // by a change to the job's annotations and seen in the operator's reconcile count, instead of a
  // sleep that hopes one happened.
  for (int pass = 0; pass < 3; ++pass) {
    const double before = reconciles(op.metrics_port);
    ASSERT_GE(before, 0) << "the operator's /metrics";
    ASSERT_EQ(env_->kubectl("annotate swarmjob grow --overwrite test.swarm-operator.io/pass=" + std::to_string(pass)), 0);
    ASSERT_TRUE(wait_until([&] { return reconciles(op.metrics_port) > before; }, 20s)) << "no reconcile after pass " << pass;
  }
  ASSERT_TRUE(monitor.await_samples(2));
  EXPECT_EQ(monitor.under_seconds(), recovered) << "a stage fell below minPerStage while the pool grew";
  int waiting_in_us = 0;
  for (const auto& p : live_workers(*env_, "grow")) waiting_in_us += pool_of(p) == "spot-us" && node_of(p).empty();
  EXPECT_EQ(waiting_in_us, 2) << "the replacements were kept (unschedulableSeconds 120)";
  EXPECT_NE(events("WorkerSurge").find("minPerStage"), std::string::npos) << events("WorkerSurge");
  // The new node: the replacements run there and the surge workers retire.
  spot_node(*env_, "us-1", "us-central1", "us-central1-b");
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "grow");
    if (ws.size() != 2 || count_ready(ws) != 2) return false;
    for (const auto& p : ws)
      if (pool_of(p) != "spot-us") return false;
    return true;
  }, 40s));
  monitor.stop();
  std::cerr << "autoscaled pool: stage-unserved " << recovered << " s after the node loss, "
            << monitor.under_seconds() - recovered << " s while the pool grew and the surge retired\n";
  EXPECT_EQ(monitor.under_seconds(), recovered);
  for (const auto& p : env_->get_job("grow")["status"]["pools"]) EXPECT_TRUE(p.value("available", false)) << p.dump();
}

TEST_F(OperatorCapacity, ACordonedNodeKeepsItsWorkersButIsNotCapacity) {
  // Pool "a" (no spot labels: a cordon is no notice there) and a fallback pool "b".
  for (const char* n : {"a-0", "a-1"}) {
    env_->create_node(n, {{"topology.kubernetes.io/region", "r1"}, {"node-group", "a"}});
    set_gpus(*env_, n, 2);
  }
  env_->create_node("b-0", {{"topology.kubernetes.io/region", "r1"}, {"node-group", "b"}});
  set_gpus(*env_, "b-0", 2);
  auto op = env_->start_operator();
  const std::string spec =
      "  pipeline: {stages: 2}\n  workers:\n    perStage: 2\n"
      "    resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}\n"
      "  nodePools:\n  - {name: a, nodeSelector: {node-group: a}, priority: 100}\n"
      "  - {name: b, nodeSelector: {node-group: b}, priority: 10}\n";
  ASSERT_EQ(env_->apply_yaml(job_yaml("cordon", spec)), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "cordon")) == 4; }, 60s));
  // A third node in pool a, empty, cordoned at once (kubectl cordon: spec.unschedulable).
  env_->create_node("a-2", {{"topology.kubernetes.io/region", "r1"}, {"node-group", "a"}});
  set_gpus(*env_, "a-2", 2);
  env_->client().patch("/api/v1/nodes/a-1", {{"spec", {{"unschedulable", true}}}});
  env_->client().patch("/api/v1/nodes/a-2", {{"spec", {{"unschedulable", true}}}});
  std::set<std::string> on_a1;
  for (const auto& p : live_workers(*env_, "cordon"))
    if (node_of(p) == "a-1") on_a1.insert(p["metadata"]["name"]);
  ASSERT_TRUE(wait_until([&] { return pool_status("cordon", "a").value("nodesUnavailable", -1) == 2; }, 15s))
      << pool_status("cordon", "a").dump();
  EXPECT_EQ(pool_status("cordon", "a").value("freeSlots", -1), 0) << "a cordoned node is no capacity";
  // a-0 goes: its workers' replacements skip pool a (only cordoned room left) for b, at once.
  const auto t0 = Clock::now();
  env_->delete_node("a-0");
  ASSERT_TRUE(wait_until([&] { return ready_off(*env_, "cordon", 4, {"a-0"}); }, 45s));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "node lost beside a cordoned one: replacements ready after " << seconds << " s\n";
  EXPECT_LT(seconds, 30.0);
  std::set<std::string> still_on_a1;
  for (const auto& p : live_workers(*env_, "cordon")) {
    if (node_of(p) == "a-1") {
      still_on_a1.insert(p["metadata"]["name"]);
    } else {
      EXPECT_EQ(pool_of(p), "b") << p["metadata"]["name"];
    }
  }
  EXPECT_EQ(still_on_a1, on_a1) << "workers on a cordoned node (no notice) keep running";
}

}  // namespace
}  // namespace swarm::optest
