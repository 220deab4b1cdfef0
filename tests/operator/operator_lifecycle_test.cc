// The operator's own life against a real control plane: killed and restarted mid-job (nothing
// duplicated, status rebuilt), watches expiring (410 Gone after an API server restart), and two
// replicas with one leader and a fast hand-over.
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/operator/fixtures.h"

namespace swarm::optest {
namespace {

using namespace std::chrono_literals;

class OperatorLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<TestEnv>();
    env_->start_fake_kubelet();
    create_standard_nodes(*env_);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::string out;
      env_->kubectl("get pods -o wide", &out);
      std::cerr << out;
      for (int i = 1; i <= 3; ++i) std::cerr << tail(read_text(env_->dir() + "/op-" + std::to_string(i) + ".log"), 30);
    }
    env_.reset();
  }
  std::set<std::string> all_pod_names(const std::string& job) {
    std::set<std::string> names;
    for (const auto& p : env_->pods("swarm-operator.io/job=" + job)) names.insert(p["metadata"]["name"]);
    return names;
  }
  std::unique_ptr<TestEnv> env_;
};

TEST_F(OperatorLifecycle, KilledAndRestartedMidJobDuplicatesNothingAndRebuildsStatus) {
  auto op = env_->start_operator();
  ASSERT_EQ(env_->apply_yaml(job_yaml("restart", two_pool_spec(3, 2, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "restart")) == 6; }, 30s));
  ASSERT_TRUE(wait_until([&] { return env_->get_job("restart")["status"].value("phase", "") == "Running"; }, 10s));
  const auto before = all_pod_names("restart");
  ASSERT_EQ(before.size(), 6u + 1u + 1u);  // workers, trainer, registry

  op.proc.signal(SIGKILL);
  op.proc.stop();
  // While it is down: its status is wiped and a worker's node is reclaimed.
  env_->client().patch("/apis/swarm-operator.io/v1alpha1/namespaces/default/swarmjobs/restart/status",
                       {{"status", nullptr}});
  std::string node = live_workers(*env_, "restart").front()["spec"]["nodeName"];
  size_t on_node = 0;
  for (const auto& p : live_workers(*env_, "restart")) on_node += p["spec"]["nodeName"] == node;
  env_->delete_node(node);

  auto op2 = env_->start_operator();
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "restart");
    for (const auto& p : ws)
      if (p["spec"].value("nodeName", "") == node) return false;
    return count_ready(ws) == 6;
  }, 30s));
  // One new pod per lost worker, none twice, the lost ones gone.
  ASSERT_TRUE(wait_until([&] { return env_->get_job("restart")["status"].value("workersReady", "") == "6/6"; }, 15s));
  const auto after = all_pod_names("restart");
  std::set<std::string> added;
  for (const auto& n : after)
    if (!before.count(n)) added.insert(n);
  EXPECT_EQ(added.size(), on_node);
  EXPECT_EQ(live_workers(*env_, "restart").size(), 6u);
  EXPECT_EQ(env_->pods("swarm-operator.io/job=restart,swarm-operator.io/role=trainer").size(), 1u);
  EXPECT_EQ(env_->pods("swarm-operator.io/job=restart,swarm-operator.io/role=registry").size(), 1u);
  const json status = env_->get_job("restart")["status"];
  EXPECT_EQ(status.value("phase", ""), "Running");
  EXPECT_EQ(status["stages"].size(), 3u);
  EXPECT_EQ(status.value("observedGeneration", 0), env_->get_job("restart")["metadata"].value("generation", -1));
  // The restarted operator, settled, creates nothing more.
  const double posts = op2.metric("swarm_operator_api_requests_total{verb=\"POST\"}");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(all_pod_names("restart"), after);
  EXPECT_LE(op2.metric("swarm_operator_api_requests_total{verb=\"POST\"}") - posts, 2) << "events only";
}

TEST(OperatorWatchExpiry, ExpiredWatchesRelistAndMissNothing) {
  // Watches served by etcd itself (no watch cache) and history compacted every second: a watch
  // resumed from a resourceVersion a few seconds old is answered 410 Gone.
  TestEnv env({"--watch-cache=false", "--etcd-compaction-interval=1s"});
  env.start_fake_kubelet();
  create_standard_nodes(env);
  auto op = env.start_operator();
  ASSERT_EQ(env.apply_yaml(job_yaml("expiry", two_pool_spec(2, 1, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(env, "expiry")) == 2; }, 30s));
  ASSERT_TRUE(wait_until([&] { return op.metric("swarm_operator_watch_relists_total{resource=\"nodes\"}") >= 1; }, 5s));
  const double relists = op.metric("swarm_operator_watch_relists_total{resource=\"nodes\"}");

  // The operator is frozen while the world moves on and the API server restarts (its watches
  // break); a node with a worker disappears meanwhile.
  op.proc.signal(SIGSTOP);
  const std::string node = live_workers(env, "expiry").front()["spec"]["nodeName"];
  env.restart_apiserver();
  env.delete_node(node);
  for (int i = 0; i < 30; ++i) {  // history to compact
    env.client().create("/api/v1/namespaces/default/configmaps",
                        {{"metadata", {{"name", "churn-" + std::to_string(i)}}}, {"data", {{"k", "v"}}}});
    env.create_node("churn-" + std::to_string(i), {{"churn", "true"}});
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2500ms);  // two compaction rounds
  op.proc.signal(SIGCONT);
  ASSERT_TRUE(wait_until([&] { return op.metric("swarm_operator_watch_relists_total{resource=\"nodes\"}") > relists; }, 30s))
      << tail(read_text(env.dir() + "/op-1.log"), 30);
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(env, "expiry");
    for (const auto& p : ws)
      if (p["spec"].value("nodeName", "") == node) return false;
    return count_ready(ws) == 2;
  }, 30s));
  EXPECT_NE(read_text(env.dir() + "/op-1.log").find("410"), std::string::npos);
  op.proc.stop();
}

TEST_F(OperatorLifecycle, TwoReplicasOneLeaderFastHandOver) {
  auto a = env_->start_operator({}, "op");
  ASSERT_TRUE(wait_until([&] { return a.metric("swarm_operator_is_leader") == 1; }, 15s));
  auto b = env_->start_operator({}, "op");
  ASSERT_TRUE(wait_until([&] { return b.metric("swarm_operator_is_leader") == 0; }, 15s));
  ASSERT_EQ(env_->apply_yaml(job_yaml("ha", two_pool_spec(2, 2, 4))), 0);
  ASSERT_TRUE(wait_until([&] { return count_ready(live_workers(*env_, "ha")) == 4; }, 30s));
  EXPECT_EQ(a.metric("swarm_operator_is_leader"), 1);
  EXPECT_EQ(b.metric("swarm_operator_is_leader"), 0);
  EXPECT_EQ(b.metric("swarm_operator_api_requests_total{verb=\"POST\"}"), -1) << "the standby wrote nothing";
  const json lease = env_->client().get("/apis/coordination.k8s.io/v1/namespaces/default/leases/swarm-operator");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-1");

  // Graceful stop releases the Lease: the standby leads within about one retry period.
  const auto t0 = std::chrono::steady_clock::now();
  a.proc.stop();
  ASSERT_TRUE(wait_until([&] { return b.metric("swarm_operator_is_leader") == 1; }, 5s));
  const double handover = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "hand-over after graceful stop: " << handover << " s\n";
  EXPECT_LT(handover, 3.0);
  // The new leader keeps the job whole and creates nothing twice.
  auto c = env_->start_operator({}, "op");
  std::string node;
  for (const auto& p : live_workers(*env_, "ha")) node = p["spec"]["nodeName"];
  env_->add_taint(node, "cloud.google.com/impending-node-termination");
  ASSERT_TRUE(wait_until([&] {
    auto ws = live_workers(*env_, "ha");
    for (const auto& p : ws)
      if (p["spec"].value("nodeName", "") == node) return false;
    return count_ready(ws) == 4;
  }, 30s));
  EXPECT_EQ(live_workers(*env_, "ha").size(), 4u);
  EXPECT_EQ(c.metric("swarm_operator_is_leader"), 0);

  // A leader that dies without releasing: the standby waits out the lease (4 s here), no longer.
  const auto t1 = std::chrono::steady_clock::now();
  b.proc.signal(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return c.metric("swarm_operator_is_leader") == 1; }, 10s));
  std::cerr << "hand-over after SIGKILL: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() << " s\n";
  b.proc.stop();
}

}  // namespace
}  // namespace swarm::optest
