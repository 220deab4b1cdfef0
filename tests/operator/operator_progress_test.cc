// Job progress in .status: the operator reads a real `swarm registry` (started here on loopback
// and pointed at through the swarm-operator.io/registry-url annotation), fed with heartbeats and
// events the way workers send them (RegistryClient), and the figures show in the SwarmJob's status
// on a real API server. A registry that goes away, or a URL that is no registry, gives a
// RegistryReachable=False condition and a Warning Event; the operator keeps running. The registry
// takes only requests signed with the job secret: the test creates the job's Secret
// (`progress-secret`, key token) before the job, so the registry, this test's client and the
// operator (which reads it through the API server) hold the same one.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include "registry/registry_client.h"
#include "tests/planner/peer_records.h"
#include "tests/operator/fixtures.h"

namespace swarm::optest {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSecret = "operator-progress-secret-0123456789";

// The job's condition of `type`, or nullptr (a pointer into `job` itself, not into a copy).
const json* condition(const json& job, const std::string& type) {
  if (!job.contains("status") || !job["status"].contains("conditions")) return nullptr;
  for (const auto& c : job["status"]["conditions"])
    if (c.value("type", "") == type) return &c;
  return nullptr;
}

std::string condition_field(const json& job, const std::string& type, const std::string& field) {
  for (const auto& c : job["status"].value("conditions", json::array()))
    if (c.value("type", "") == type) return c.value(field, "");
  return "";
}

planner::PeerRecord worker(const std::string& id, int stage, std::int64_t step, double sps, int port) {
  planner::PeerRecord r = testing::worker_record(id, stage, port);
  r.step = step;
  r.samples_per_second = sps;
  r.queue_length = stage;
  return r;
}

class OperatorProgress : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<TestEnv>();
    env_->start_fake_kubelet();
    create_standard_nodes(*env_);
    registry_port_ = free_port();
    ::setenv("SWARM_JOB_SECRET", kSecret, 1);  // `swarm registry` without --job reads this variable
    std::string out;
    ASSERT_EQ(env_->kubectl(std::string("create secret generic progress-secret --from-literal=token=") + kSecret, &out), 0)
        << out;
    registry_ = spawn({std::string(SWARM_BINARY_DIR) + "/bin/swarm", "registry", "--host", "127.0.0.1", "--port",
                       std::to_string(registry_port_), "--peer-expiry", "120"},
                      env_->dir() + "/registry.log");
    url_ = "http://127.0.0.1:" + std::to_string(registry_port_);
    client_ = std::make_unique<registry::RegistryClient>(url_, 2000ms, kSecret);
    ASSERT_TRUE(wait_until([&] { return client_->healthy(); }, 20s)) << read_text(env_->dir() + "/registry.log");
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << env_->get_job("progress").dump(2) << "\n" << tail(read_text(env_->dir() + "/op-1.log"), 40) << "\n";
    }
    registry_.stop();
    env_.reset();
  }
  std::unique_ptr<TestEnv> env_;
  Process registry_;
  int registry_port_ = 0;
  std::string url_;
  std::unique_ptr<registry::RegistryClient> client_;
};

TEST_F(OperatorProgress, RegistryFiguresReachStatusAndABadRegistryIsReported) {
  auto op = env_->start_operator({"--progress-period", "0.5", "--progress-timeout", "1", "--progress-window", "30"});
  const std::string spec = "  pipeline: {stages: 2}\n  workers: {perStage: 1}\n  training: {globalBatch: 32, microbatch: 8}\n";
  const std::string yaml = "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: progress\n"
                           "  annotations: {swarm-operator.io/registry-url: \"" + url_ + "\"}\nspec:\n" + spec;
  std::string out;
  ASSERT_EQ(env_->apply_yaml(yaml, &out), 0) << out;
  ASSERT_TRUE(wait_until([&] { return env_->get_job("progress")["status"].value("phase", "") == "Running"; }, 30s));

  // Heartbeats as workers send them, and events as peers report them.
  client_->announce(worker("w-a", 0, 7, 120.5, 9001));
  client_->announce(worker("w-b", 1, 6, 80.25, 9002));
  planner::PeerRecord trainer;  // as a trainer's heartbeat carries its recent loss
  trainer.peer_id = "trainer0";
  trainer.role = "trainer";
  trainer.host = "127.0.0.1";
  trainer.state = planner::PeerState::Serving;
  trainer.loss = 2.3456;
  client_->announce(trainer);
  client_->add_event("checkpoint_restores", 2);
  client_->add_event("handoffs", 1);
  json job;
  ASSERT_TRUE(wait_until([&] {
    job = env_->get_job("progress");
    const json& st = job["status"];
    return st.value("step", 0) == 6 && st["stages"].size() == 2 && st["stages"][0].value("step", 0) == 7 &&
           st.value("loss", 0.0) == 2.3456 &&
           st.value("swarmEvents", json::object()).value("handoffs", 0) == 1;
  }, 20s)) << job["status"].dump(2);
  const json& st = job["status"];
  EXPECT_DOUBLE_EQ(st["stages"][0].value("samplesPerSecond", 0.0), 120.5);
  EXPECT_DOUBLE_EQ(st["stages"][1].value("samplesPerSecond", 0.0), 80.25);
  EXPECT_EQ(st["stages"][1].value("step", 0), 6);
  EXPECT_EQ(st["stages"][1].value("queueLength", 0), 1);
  EXPECT_EQ(st["stages"][0].value("peers", 0), 1);
  EXPECT_EQ(st["stages"][0].value("ready", 0), 1);  // pod counts stay the reconcile's
  EXPECT_EQ(st["swarmEvents"].value("checkpoint_restores", 0), 2);
  EXPECT_EQ(st.value("rebalanceMoves", -1), 0);
  EXPECT_FALSE(st.value("lastStepTime", "").empty());
  EXPECT_EQ(condition_field(job, "RegistryReachable", "status"), "True");
  EXPECT_NE(condition_field(job, "RegistryReachable", "message").find(url_), std::string::npos);

  // Training goes on: 10 more steps in about 2 s -> samples/s = steps x globalBatch / seconds.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= 10; ++i) {
    client_->announce(worker("w-a", 0, 7 + i, 120.5, 9001));
    client_->announce(worker("w-b", 1, 6 + i, 80.25, 9002));
    std::this_thread::sleep_for(200ms);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(wait_until([&] { return env_->get_job("progress")["status"].value("step", 0) == 16; }, 10s));
  // The operator's window spans the readings it took (every 0.5 s) since step 6: between 10
  // steps over the whole run plus a period or two, and 10 steps over the announcing time minus one.
  double sps = 0;
  ASSERT_TRUE(wait_until([&] {
    sps = env_->get_job("progress")["status"].value("samplesPerSecond", 0.0);
    return sps > 0;
  }, 10s));
  EXPECT_GT(sps, 10 * 32 / (took + 15.0)) << "took " << took;
  EXPECT_LT(sps, 10 * 32 / (took - 1.0)) << "took " << took;
  ASSERT_EQ(env_->kubectl("get swarmjob progress", &out), 0);
  EXPECT_NE(out.find(" 16 "), std::string::npos) << out;  // the STEP column

  // The registry dies: condition False with the URL, a Warning Event, figures kept, operator alive.
  registry_.stop();
  ASSERT_TRUE(wait_until([&] {
    job = env_->get_job("progress");
    return condition_field(job, "RegistryReachable", "status") == "False";
  }, 20s)) << job["status"].dump(2);
  EXPECT_EQ(condition_field(job, "RegistryReachable", "reason"), "RegistryUnreachable");
  EXPECT_NE(condition_field(job, "RegistryReachable", "message").find(url_), std::string::npos)
      << condition_field(job, "RegistryReachable", "message");
  EXPECT_EQ(job["status"].value("step", 0), 16);
  EXPECT_EQ(job["status"].value("phase", ""), "Running");  // training state is the pods', not the registry's
  ASSERT_TRUE(wait_until([&] {
    env_->kubectl("get events --field-selector involvedObject.name=progress,reason=RegistryUnreachable", &out);
    return out.find("RegistryUnreachable") != std::string::npos;
  }, 10s)) << out;
  EXPECT_TRUE(op.proc.alive());
  EXPECT_GE(op.metric("swarm_operator_registry_reads_total{result=\"ok\"}"), 2);
  EXPECT_GE(op.metric("swarm_operator_registry_reads_total{result=\"RegistryUnreachable\"}"), 1);

  // A URL that answers but is no registry (the operator's own metrics server): a bad reply.
  const std::string not_registry = "http://127.0.0.1:" + std::to_string(op.metrics_port);
  ASSERT_EQ(env_->kubectl("annotate swarmjob progress --overwrite swarm-operator.io/registry-url=" + not_registry, &out), 0)
      << out;
  ASSERT_TRUE(wait_until([&] {
    job = env_->get_job("progress");
    return condition_field(job, "RegistryReachable", "reason") == "RegistryBadReply";
  }, 20s)) << job["status"].dump(2);
  EXPECT_NE(condition_field(job, "RegistryReachable", "message").find(not_registry), std::string::npos)
      << condition_field(job, "RegistryReachable", "message");
  EXPECT_TRUE(op.proc.alive());
  EXPECT_NE(condition(job, "Ready"), nullptr);
}

// Issue 11: a failure a worker reports to the registry (StageReset: a stage came back without its
// state) turns the job Failed: condition, phase, a Warning Event and the operator's metric.
TEST_F(OperatorProgress, AFailureTheRegistryReportsTurnsTheJobFailed) {
  auto op = env_->start_operator({"--progress-period", "0.5", "--progress-timeout", "1"});
  const std::string spec = "  pipeline: {stages: 2}\n  workers: {perStage: 1}\n";
  const std::string yaml = "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: progress\n"
                           "  annotations: {swarm-operator.io/registry-url: \"" + url_ + "\"}\nspec:\n" + spec;
  std::string out;
  ASSERT_EQ(env_->apply_yaml(yaml, &out), 0) << out;
  ASSERT_TRUE(wait_until([&] { return env_->get_job("progress")["status"].value("phase", "") == "Running"; }, 30s));
  client_->announce(worker("w-a", 0, 40, 100, 9001));
  ASSERT_TRUE(wait_until([&] { return condition_field(env_->get_job("progress"), "RegistryReachable", "status") == "True"; }, 20s));
  EXPECT_EQ(condition(env_->get_job("progress"), "Failed"), nullptr) << "no Failed condition while healthy";

  client_->report_failure("StageReset", 1, 42, "stage 1 lost its last peer and no checkpoint was found");
  json job;
  ASSERT_TRUE(wait_until([&] {
    job = env_->get_job("progress");
    return job["status"].value("phase", "") == "Failed";
  }, 20s)) << job["status"].dump(2);
  EXPECT_EQ(condition_field(job, "Failed", "status"), "True");
  EXPECT_EQ(condition_field(job, "Failed", "reason"), "StageReset");
  const std::string msg = condition_field(job, "Failed", "message");
  EXPECT_NE(msg.find("stage 1 at step 42"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no checkpoint was found"), std::string::npos) << msg;
  EXPECT_TRUE(wait_until([&] {
    env_->kubectl("get events --field-selector reason=StageReset", &out);
    return out.find("stage 1 at step 42") != std::string::npos;
  }, 10s)) << out;
  EXPECT_TRUE(wait_until([&] { return op.metric("swarm_operator_job_failures_total{reason=\"StageReset\"}") == 1; }, 10s));
  // It stays Failed (the poller no longer reads a Failed job; its last word stands), counted once.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(env_->get_job("progress")["status"].value("phase", ""), "Failed");
  EXPECT_EQ(op.metric("swarm_operator_job_failures_total{reason=\"StageReset\"}"), 1);
}

// Issue 29: a job deleted and re-created under its name, its Secret deleted and made anew (so the
// new registry takes only the new secret). The operator kept the job's secret by name for 60 s,
// so it signed the new job's reads with the old one and its status stayed at step 0 with the
// registry answering 401 (48 s on the kubelet cluster). Read afresh by the job's UID, the
// re-created job's progress shows within a few poll periods.
TEST_F(OperatorProgress, AJobRecreatedWithANewSecretIsReadWithItAtOnce) {
  auto op = env_->start_operator({"--progress-period", "0.5", "--progress-timeout", "1"});
  const std::string yaml = "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: progress\n"
                           "  annotations: {swarm-operator.io/registry-url: \"" + url_ + "\"}\n"
                           "spec:\n  pipeline: {stages: 2}\n  workers: {perStage: 1}\n";
  std::string out;
  ASSERT_EQ(env_->apply_yaml(yaml, &out), 0) << out;
  client_->announce(worker("w-a", 0, 40, 100, 9001));
  client_->announce(worker("w-a1", 1, 40, 100, 9003));
  ASSERT_TRUE(wait_until([&] { return env_->get_job("progress")["status"].value("step", 0) == 40; }, 20s))
      << env_->get_job("progress")["status"].dump(2);

  ASSERT_EQ(env_->kubectl("delete swarmjob progress --wait=true", &out), 0) << out;
  ASSERT_EQ(env_->kubectl("delete secret progress-secret --ignore-not-found", &out), 0) << out;
  const std::string renewed = "operator-progress-secret-renewed-98765";
  ASSERT_EQ(env_->kubectl("create secret generic progress-secret --from-literal=token=" + renewed, &out), 0) << out;
  registry_.stop();
  ::setenv("SWARM_JOB_SECRET", renewed.c_str(), 1);
  registry_ = spawn({std::string(SWARM_BINARY_DIR) + "/bin/swarm", "registry", "--host", "127.0.0.1", "--port",
                     std::to_string(registry_port_), "--peer-expiry", "120"},
                    env_->dir() + "/registry2.log");
  client_ = std::make_unique<registry::RegistryClient>(url_, 2000ms, renewed);
  ASSERT_TRUE(wait_until([&] { return client_->healthy(); }, 20s)) << read_text(env_->dir() + "/registry2.log");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(env_->apply_yaml(yaml, &out), 0) << out;
  json job;
  ASSERT_TRUE(wait_until([&] {
    client_->announce(worker("w-b", 0, 3, 100, 9002));
    client_->announce(worker("w-b1", 1, 3, 100, 9004));
    job = env_->get_job("progress");
    return job["status"].value("step", 0) == 3 && condition_field(job, "RegistryReachable", "status") == "True";
  }, 15s)) << "the re-created job's progress was not read with its new secret: " << job["status"].dump(2) << "\n"
           << tail(read_text(env_->dir() + "/registry2.log"), 10);
  std::cerr << "re-created job: its step in status "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s after the apply\n";
  EXPECT_TRUE(op.proc.alive());
}

}  // namespace
}  // namespace swarm::optest
