// The CRD against a real kube-apiserver: invalid SwarmJobs are refused with a message naming the
// field; valid ones are stored with every default filled in.
#include <gtest/gtest.h>

#include <fstream>

#include "operator/api/quantity.h"
#include "operator/api/swarmjob.h"
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
      {"unknown architecture", "  model: {architecture: mamba}\n", "spec.model.architecture"},
      {"gpt2 with grouped-query attention", "  model: {numKeyValueHeads: 2}\n", "spec.model.numKeyValueHeads"},
      {"llama kv heads not a divisor", "  model: {architecture: llama, numKeyValueHeads: 4}\n",
       "spec.model.numKeyValueHeads"},
      {"gpt2 with a head width", "  model: {headDim: 64}\n", "spec.model.headDim"},
      {"llama odd head width", "  model: {architecture: llama, headDim: 33}\n", "spec.model.headDim"},
      {"gpt2 with ropeTheta", "  model: {ropeTheta: 500000}\n", "spec.model.ropeTheta"},
      {"gpt2 with rope scaling", "  model: {ropeScaling: {factor: 8}}\n", "spec.model.ropeScaling"},
      {"rope scaling high <= low", "  model: {architecture: llama, ropeScaling: {lowFreqFactor: 4, highFreqFactor: 2}}\n",
       "spec.model.ropeScaling.highFreqFactor"},
      {"gpt2 without biases", "  model: {mlpBias: false}\n", "spec.model.mlpBias"},
      {"gpt2 with init", "  model: {init: {from: /m}}\n", "spec.model.init"},
      {"init without from", "  model: {architecture: llama, init: {format: huggingface}}\n", "spec.model.init.from"},
      {"llama with shared layers", "  model: {architecture: llama, sharedLayers: true}\n", "spec.model.sharedLayers"},
      {"a count per stage", "  pipeline: {stages: 3, layersPerStage: [2, 2]}\n", "spec.pipeline.layersPerStage"},
      {"zero layers in a stage", "  pipeline: {layersPerStage: [2, 0]}\n", "spec.pipeline.layersPerStage[1]"},
      {"both layer counts", "  model: {layersPerStage: 4}\n  pipeline: {layersPerStage: [2, 3]}\n",
       "spec.model.layersPerStage"},
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

// A server-side dry run of `yaml` (one or more documents): the API server validates it fully,
// CEL included, and stores nothing.
int dry_run(TestEnv& env, const std::string& yaml, std::string* out, const std::string& flags = "") {
  const std::string path = env.dir() + "/dry-run-" + std::to_string(std::rand()) + ".yaml";
  std::ofstream(path) << yaml;
  return env.kubectl("apply --dry-run=server " + flags + " -f " + path, out);
}

struct Refused {
  const char* what;
  std::string spec_yaml;  // under spec:, indented by 2
  std::string field;      // the API server's message must name it...
  std::string also;       // ...and say this (the rule, the value)
  std::string name = "bad-job";
};

// The jobs that passed `kubectl apply` and then sat Pending (SpecValid=True, no pods or some), or
// were refused only later in status: every rule the API server can check is in the CRD.
TEST_F(CrdValidation, RefusesAtApplyWhatTheOperatorWouldRefuseLater) {
  const std::string pools = "  nodePools:\n";
  const std::string res = "  workers:\n    resources:\n";
  const std::vector<Refused> cases = {
      {"no pools", "  nodePools: []\n", "spec.nodePools", "must list at least one pool, got []"},
      {"negative gpu", res + "      limits: {nvidia.com/gpu: \"-1\"}\n",
       "spec.workers.resources.limits[nvidia.com/gpu]", "Invalid value: \"-1\": must not be negative"},
      {"empty region", pools + "  - {name: a, region: \"\"}\n", "spec.nodePools[0].region",
       "Invalid value: \"\": must be a label value"},
      {"bucket of 0 characters", "  checkpoint: {path: \"s3:///runs\"}\n", "spec.checkpoint.path",
       "Invalid value: \"s3:///runs\": bucket must have 3 to 63 characters, got \"\""},
      {"bucket with _", "  checkpoint: {path: \"s3://my_bucket/runs\"}\n", "spec.checkpoint.path",
       "bucket may hold lowercase letters, digits, '.' and '-' only, got \"my_bucket\""},
      {"bucket with capitals", "  checkpoint: {path: \"s3://MyBucket\"}\n", "spec.checkpoint.path",
       "bucket may hold lowercase letters, digits, '.' and '-' only, got \"MyBucket\""},
      {"prefix with ..", "  checkpoint: {path: \"s3://ckpts/a/../b\"}\n", "spec.checkpoint.path",
       "Invalid value: \"s3://ckpts/a/../b\": prefix has an empty, \".\" or \"..\" segment"},
      {"sentencepiece without a model", "  training: {tokenizer: {kind: sentencepiece}}\n",
       "spec.training.tokenizer.model", "is required with spec.training.tokenizer.kind sentencepiece"},
      {"huggingface without a file", "  training: {tokenizer: {kind: huggingface}}\n", "spec.training.tokenizer.file",
       "is required with spec.training.tokenizer.kind huggingface"},
      {"a file with sentencepiece",
       "  training: {tokenizer: {kind: sentencepiece, model: sp.model, file: tokenizer.json}}\n",
       "spec.training.tokenizer.file", "is only for kind huggingface (kind is sentencepiece), got \"tokenizer.json\""},
      {"huggingface over text", "  training: {tokenizer: {kind: huggingface, file: t.json}, dataset: {format: text}}\n",
       "spec.training.dataset.format", "must be tokens or auto with spec.training.tokenizer.kind huggingface"},
      {"nothing held out to evaluate", "  training: {evalBatches: 4, dataset: {validationFraction: 0}}\n",
       "spec.training.dataset.validationFraction", "is 0 (nothing held out) while spec.training.evalBatches is above 0"},
      // The other rules of common/job_spec_validate.cc and of the pods the operator makes.
      {"bucket of 2 characters", "  checkpoint: {path: \"s3://ab\"}\n", "spec.checkpoint.path", "got \"ab\""},
      {"bucket ending with -", "  checkpoint: {path: \"s3://ckpts-\"}\n", "spec.checkpoint.path",
       "bucket must start and end with a letter or digit, got \"ckpts-\""},
      {"empty prefix segment", "  checkpoint: {path: \"s3://ckpts/a//b\"}\n", "spec.checkpoint.path",
       "prefix has an empty, \".\" or \"..\" segment"},
      {"control character", "  checkpoint: {path: \"s3://ckpts/a\\tb\"}\n", "spec.checkpoint.path",
       "prefix holds a control character"},
      {"prefix over 900 bytes", "  checkpoint: {path: \"s3://ckpts/" + std::string(901, 'p') + "\"}\n",
       "spec.checkpoint.path", "prefix is longer than 900 bytes"},
      {"prefix over 900 bytes with the job name", "  checkpoint: {path: \"s3://ckpts/" + std::string(896, 'p') + "\"}\n",
       "spec.checkpoint.path", "the prefix with the job name appended (.../edge) is longer than 900 bytes", "edge"},
      {"a model with bytes", "  training: {tokenizer: {model: m.model}}\n", "spec.training.tokenizer.model",
       "is only for kind sentencepiece (kind is bytes), got \"m.model\""},
      {"claim without a path", "  checkpoint: {volumeClaimName: shared}\n", "spec.checkpoint.path",
       "is required with spec.checkpoint.volumeClaimName (\"shared\")"},
      {"name with a dot", "  pipeline: {stages: 2}\n", "metadata.name", "must be a DNS-1123 label", "bad.job"},
      {"negative cpu", "  trainers: {resources: {requests: {cpu: -1}}}\n", "spec.trainers.resources.requests[cpu]",
       "Invalid value: -1: must not be negative"},
      {"not a quantity", res + "      limits: {memory: \"1.2.3\"}\n", "spec.workers.resources.limits[memory]",
       "Invalid value: \"1.2.3\": must be a Kubernetes quantity"},
      {"half a gpu", res + "      limits: {nvidia.com/gpu: \"0.5\"}\n", "spec.workers.resources.limits",
       "must be whole numbers for extended resources, got nvidia.com/gpu: 0.5"},
      {"unknown resource", res + "      requests: {cpus: 1}\n", "spec.workers.resources.requests",
       "must name container resources (cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource "
       "domain/name such as nvidia.com/gpu), got \"cpus\""},
      {"request above limit", "  trainers: {resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}}\n",
       "spec.trainers.resources.requests", "must not exceed limits, got memory 2Gi"},
      {"gpu request other than limit", res + "      requests: {nvidia.com/gpu: 1}\n      limits: {nvidia.com/gpu: 2}\n",
       "spec.workers.resources.requests", "must equal limits for extended resources and hugepages"},
      {"hugepages without limit", res + "      requests: {hugepages-2Mi: 1Gi}\n", "spec.workers.resources.requests",
       "got hugepages-2Mi without the same value in limits"},
      {"empty zone", pools + "  - {name: a, region: r, zone: \"\"}\n", "spec.nodePools[0].zone",
       "Invalid value: \"\": must be a label value"},
      {"bad selector key", pools + "  - {name: a, nodeSelector: {\"bad key!\": x}}\n", "spec.nodePools[0].nodeSelector",
       "keys must be label keys ([DNS subdomain/]name, the name 1 to 63 letters, digits, '-', '_' and '.'), got "
       "\"bad key!\""},
      {"bad selector value", pools + "  - {name: a, nodeSelector: {k: \"bad value!\"}}\n",
       "spec.nodePools[0].nodeSelector[k]", "Invalid value: \"bad value!\": must be a label value"},
  };
  for (const Refused& c : cases) {
    std::string out;
    EXPECT_NE(dry_run(*env_, manifest(c.name, c.spec_yaml), &out), 0) << c.what << ": accepted:\n" << out;
    EXPECT_NE(out.find(c.field), std::string::npos) << c.what << ": message does not name " << c.field << ":\n" << out;
    EXPECT_NE(out.find(c.also), std::string::npos) << c.what << ": message does not say " << c.also << ":\n" << out;
  }
}

// The values just inside each of those rules are accepted, and the operator reads them too.
TEST_F(CrdValidation, AcceptsTheValuesJustInsideTheRules) {
  const std::string res = "  workers:\n    resources:\n";
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"bucket of 3 characters", "  checkpoint: {path: \"s3://abc\"}\n"},
      {"bucket of 63 characters", "  checkpoint: {path: \"s3://" + std::string(63, 'b') + "/runs\"}\n"},
      {"dots that are no . or .. segment", "  checkpoint: {path: \"s3://a.b-c/.a/..b/.../x//\"}\n"},
      {"prefix of 900 bytes with the job name", "  checkpoint: {path: \"s3://ckpts/" + std::string(895, 'p') + "\"}\n"},
      {"sentencepiece with a model", "  training: {tokenizer: {kind: sentencepiece, model: /data/sp.model}}\n"},
      {"huggingface with a file over token files",
       "  training: {tokenizer: {kind: huggingface, file: /data/tokenizer.json}, dataset: {format: tokens}}\n"},
      {"no evaluation, nothing held out", "  training: {evalBatches: 0, dataset: {validationFraction: 0}}\n"},
      {"gpu 0", res + "      limits: {nvidia.com/gpu: \"0\"}\n"},
      {"gpu 1", res + "      requests: {nvidia.com/gpu: 1}\n      limits: {nvidia.com/gpu: 1}\n"},
      {"gpu 1000m is 1", res + "      requests: {nvidia.com/gpu: 1000m}\n      limits: {nvidia.com/gpu: \"1\"}\n"},
      {"requests equal to limits in other spellings",
       res + "      requests: {cpu: 100m, memory: 1Gi, hugepages-2Mi: 1Gi}\n"
             "      limits: {cpu: \"0.1\", memory: \"1073741824\", hugepages-2Mi: 1Gi}\n"},
      {"pools with labels", "  nodePools:\n  - {name: a, region: us-central1, zone: us-central1-a,"
                            " nodeSelector: {cloud.google.com/gke-spot: \"true\", dedicated: \"\"}}\n"},
  };
  for (const auto& [what, spec] : cases) {
    std::string out;
    ASSERT_EQ(dry_run(*env_, manifest("edge", spec), &out, "-o json"), 0) << what << ":\n" << out;
    // The operator's own check (the second line) agrees, on the object as the API server would store it.
    const json stored = json::parse(out, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(stored.is_object()) << what << ": not JSON:\n" << out;
    try {
      op::parse_swarmjob(stored);
    } catch (const SpecError& e) {
      ADD_FAILURE() << what << ": the operator refuses it: " << e.what();
    }
  }
}

// The operator reads quantities itself (operator/api/quantity.cc): the same strings as the API
// server's quantity(), no more, no fewer.
TEST_F(CrdValidation, TheOperatorReadsTheQuantitiesTheApiServerAccepts) {
  const std::vector<std::string> texts = {"1", "1.", ".5", "+1", "-0", "0", "1e3", "1E3", "1e+3", "1.5e3", "2E",
                                          "1Ki", "1.5Gi", "500m", "1u", "1n", "1.2.3", "1e1.5", "abc", "1Gb",
                                          "1 Gi", "e3", "0x10", "1e", ".", "+", "Gi", "1e3Ki", "-1", "--1",
                                          "1e-3", "1m5", "1e999", "1e-999", "1e1000", "1e99999999999"};
  std::string docs;
  for (size_t i = 0; i < texts.size(); ++i)
    docs += manifest("q-" + std::to_string(i), "  workers: {resources: {limits: {memory: \"" + texts[i] + "\"}}}\n") +
            "---\n";
  std::string out;
  dry_run(*env_, docs, &out);  // fails as a whole when any is refused; each object is reported
  for (size_t i = 0; i < texts.size(); ++i) {
    const bool api = out.find("swarmjob.swarm-operator.io/q-" + std::to_string(i) + " created") != std::string::npos;
    bool ours = true;
    try {
      ours = op::parse_quantity(texts[i]) >= 0;
    } catch (const std::invalid_argument&) {
      ours = false;
    }
    EXPECT_EQ(api, ours) << "\"" << texts[i] << "\": API server " << (api ? "accepts" : "refuses") << ", the operator "
                         << (ours ? "accepts" : "refuses") << "\n" << out;
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
