// The CRD against a real kube-apiserver: invalid SwarmJobs are refused with a message naming the
// field; valid ones are stored with every default filled in.
#include <gtest/gtest.h>

#include "tests/operator/testenv.h"

namespace swarm::optest {
namespace {

struct Invalid {
  const char* what;
  std::string spec_yaml;    // under spec:, indented by 2
  const char* field;        // must appear in the API server's message
  std::string name = "bad-job";
};

std::string manifest(const std::string& name, const std::string& spec) {
  return "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: " + name + "\nspec:\n" + spec;
}

class CrdValidation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { env_ = new TestEnv(); }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }
  static TestEnv* env_;
};
TestEnv* CrdValidation::env_ = nullptr;

TEST_F(CrdValidation, RefusesInvalidManifestsWithFieldPreciseMessages) {
  const std::string pools = "  nodePools:\n";
  std::vector<Invalid> cases = {
      {"too few stages", "  pipeline: {stages: 1}\n", "spec.pipeline.stages"},
      {"too many stages", "  pipeline: {stages: 65}\n", "spec.pipeline.stages"},
      {"unknown compression", "  pipeline: {compression: gzip}\n", "spec.pipeline.compression"},
      {"hidden not a multiple of heads", "  model: {hiddenSize: 100, numHeads: 6}\n", "spec.model.hiddenSize"},
      {"global batch not a multiple", "  training: {globalBatch: 60, microbatch: 8}\n", "spec.training.globalBatch"},
      {"warmup >= steps", "  training: {maxSteps: 10, schedule: {warmupSteps: 10}}\n", "spec.training.schedule.warmupSteps"},
      {"unknown optimizer", "  training: {optimizer: {name: sgd}}\n", "spec.training.optimizer.name"},
      {"zero learning rate", "  training: {optimizer: {learningRate: 0}}\n", "spec.training.optimizer.learningRate"},
      {"one beta", "  training: {optimizer: {betas: [0.9]}}\n", "spec.training.optimizer.betas"},
      {"expiry <= heartbeat", "  timeouts: {heartbeatSeconds: 2, peerExpirySeconds: 2}\n", "spec.timeouts.peerExpirySeconds"},
      {"negative timeout", "  timeouts: {connectSeconds: -1}\n", "spec.timeouts.connectSeconds"},
      {"zero workers", "  workers: {perStage: 0}\n", "spec.workers.perStage"},
      {"unknown device", "  workers: {device: tpu}\n", "spec.workers.device"},
      {"min above desired", "  workers: {perStage: 2, minPerStage: 3}\n", "spec.workers.minPerStage"},
      {"max below desired", "  workers: {perStage: 2, maxPerStage: 1}\n", "spec.workers.maxPerStage"},
      {"bad quantity", "  workers: {resources: {limits: {nvidia.com/gpu: lots}}}\n", "spec.workers.resources.limits"},
      {"gpu request without limit", "  workers: {resources: {requests: {nvidia.com/gpu: 1}}}\n", "spec.workers.resources.requests"},
      {"bad secret env", "  secret: {env: 1BAD}\n", "spec.secret.env"},
      {"secretRef without key", "  secret: {secretRef: {name: s}}\n", "spec.secret.secretRef.key"},
      {"rebalancing floor above desired", "  workers: {perStage: 1}\n  rebalancing: {minPeersPerStage: 2}\n",
       "spec.rebalancing.minPeersPerStage"},
      {"zero unschedulable window", "  placement: {unschedulableSeconds: 0}\n", "spec.placement.unschedulableSeconds"},
      {"duplicate pool", pools + "  - {name: a}\n  - {name: a}\n", "spec.nodePools[1]"},
      {"bad pool name", pools + "  - {name: Bad_Pool}\n", "spec.nodePools[0].name"},
      {"zone without region", pools + "  - {name: a, zone: us-central1-a}\n", "spec.nodePools[0].zone"},
      {"Exists toleration with value",
       pools + "  - name: a\n    tolerations: [{key: k, operator: Exists, value: v}]\n",
       "spec.nodePools[0].tolerations[0].value"},
      {"bad toleration effect", pools + "  - name: a\n    tolerations: [{key: k, effect: Sometimes}]\n",
       "spec.nodePools[0].tolerations[0].effect"},
      {"pools too small", "  pipeline: {stages: 4}\n" + pools + "  - {name: a, maxWorkers: 2}\n", "spec.nodePools"},
      {"negative maxWorkers", pools + "  - {name: a, maxWorkers: -1}\n", "spec.nodePools[0].maxWorkers"},
      {"spot pool without a checkpoint", pools + "  - {name: a, preemptible: true}\n", "spec.checkpoint.path"},
      {"autoscaled not a boolean", pools + "  - {name: a, autoscaled: maybe}\n", "spec.nodePools[0].autoscaled"},
      {"s3 settings with a folder path", "  checkpoint: {path: /ckpt, s3: {credentialsSecret: creds}}\n",
       "spec.checkpoint.s3"},
      {"claim with an s3 path", "  checkpoint: {path: s3://ckpts/runs, volumeClaimName: shared}\n",
       "spec.checkpoint.volumeClaimName"},
      {"bad credentials secret", "  checkpoint: {path: s3://ckpts, s3: {credentialsSecret: Bad_Secret}}\n",
       "spec.checkpoint.s3.credentialsSecret"},
      {"part size too small", "  checkpoint: {path: s3://ckpts, s3: {partSizeMiB: 4}}\n", "spec.checkpoint.s3.partSizeMiB"},
      {"endpoint without a scheme", "  checkpoint: {path: s3://ckpts, s3: {endpoint: minio:9000}}\n",
       "spec.checkpoint.s3.endpoint"},
      {"another scheme", "  checkpoint: {path: \"gs://ckpts\"}\n", "spec.checkpoint.path"},
      {"unknown field", "  pipeline: {stages: 2, stagez: 3}\n", "spec.pipeline.stagez"},
      {"name too long", "  pipeline: {stages: 2}\n", "metadata.name", std::string(41, 'a')},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const auto& c : cases) {
    std::string out;
    const int rc = env_->apply_yaml(manifest(c.name, c.spec_yaml), &out);
    EXPECT_NE(rc, 0) << c.what << ": accepted:\n" << out;
    EXPECT_NE(out.find(c.field), std::string::npos) << c.what << ": message does not name " << c.field << ":\n" << out;
    std::string ignored;
    EXPECT_NE(env_->kubectl("get swarmjob " + c.name, &ignored), 0) << c.what << ": object exists";
  }
}

TEST_F(CrdValidation, FillsDefaultsAndRefusesImmutableChanges) {
  std::string out;
  ASSERT_EQ(env_->apply_yaml(manifest("defaults", "  pipeline: {stages: 3}\n"), &out), 0) << out;
  json job = env_->get_job("defaults");
  EXPECT_EQ(job["spec"]["model"]["hiddenSize"], 192);
  EXPECT_EQ(job["spec"]["workers"]["image"], "ghcr.io/swarm-operator/swarm:latest");
  EXPECT_EQ(job["spec"]["placement"]["unschedulableSeconds"], 60);
  EXPECT_EQ(job["spec"]["timeouts"]["peerExpirySeconds"], 4);

  EXPECT_NE(env_->apply_yaml(manifest("defaults", "  pipeline: {stages: 4}\n"), &out), 0);
  EXPECT_NE(out.find("spec.pipeline.stages"), std::string::npos) << out;
  EXPECT_NE(out.find("immutable"), std::string::npos) << out;
  EXPECT_NE(env_->apply_yaml(manifest("defaults", "  pipeline: {stages: 3}\n  model: {layersPerStage: 4}\n"), &out), 0);
  EXPECT_NE(out.find("spec.model"), std::string::npos) << out;
  // Mutable fields stay mutable.
  EXPECT_EQ(env_->apply_yaml(manifest("defaults", "  pipeline: {stages: 3}\n  workers: {perStage: 2}\n"), &out), 0) << out;
}

// An object-storage checkpoint: stored with its fields (the operator reads credentialsSecret).
TEST_F(CrdValidation, AcceptsAnObjectStorageCheckpoint) {
  std::string out;
  ASSERT_EQ(env_->apply_yaml(manifest("s3-job", "  checkpoint:\n    path: s3://ckpts/runs\n"
                                                "    s3: {endpoint: \"http://minio.storage:9000\", region: us-east-1,"
                                                " pathStyle: true, credentialsSecret: minio-creds}\n"),
                             &out),
            0)
      << out;
  const json s3 = env_->get_job("s3-job")["spec"]["checkpoint"]["s3"];
  EXPECT_EQ(s3["credentialsSecret"], "minio-creds");
  EXPECT_EQ(s3["endpoint"], "http://minio.storage:9000");
  EXPECT_EQ(s3["pathStyle"], true);
  EXPECT_EQ(s3["partSizeMiB"], 16);  // the default
}

TEST_F(CrdValidation, AcceptsTheExamples) {
  std::string out;
  ASSERT_EQ(env_->kubectl("apply --dry-run=server -f " + std::string(SWARM_SOURCE_DIR) + "/examples/", &out), 0) << out;
}

}  // namespace
}  // namespace swarm::optest
