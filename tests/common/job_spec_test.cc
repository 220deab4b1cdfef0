#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "common/job_spec_json.h"
#include "tests/common/job_spec_fixtures.h"

namespace swarm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

const std::string kExample = std::string(SWARM_SOURCE_DIR) + "/examples/tiny-lm.yaml";

using spec_test::errors_of;
using spec_test::kHeader;
using spec_test::manifest;

TEST(JobSpec, BundledExampleParsesToTheDefaults) {
  JobSpec spec = load_job_spec(kExample);
  EXPECT_EQ(spec.api_version, "swarm-operator.io/v1alpha1");
  EXPECT_EQ(spec.kind, "SwarmJob");
  EXPECT_EQ(spec.name, "tiny-lm");
  EXPECT_EQ(spec.namespace_, "default");
  EXPECT_EQ(spec.model.vocab_size, 256);
  EXPECT_EQ(spec.model.hidden_size, 192);
  EXPECT_EQ(spec.model.num_heads, 6);
  EXPECT_EQ(spec.model.layers_per_stage, 2);
  EXPECT_EQ(spec.model.sequence_length, 128);
  EXPECT_EQ(spec.model.mlp_ratio, 4);
  EXPECT_FALSE(spec.model.shared_layers);
  EXPECT_EQ(spec.pipeline.stages, 2);
  EXPECT_EQ(spec.pipeline.compression, Compression::None);
  EXPECT_EQ(spec.training.global_batch, 64);
  EXPECT_EQ(spec.training.microbatch, 8);
  EXPECT_EQ(spec.training.max_steps, 300);
  EXPECT_EQ(spec.training.eval_batches, 8);
  EXPECT_EQ(spec.training.seed, 1u);
  EXPECT_EQ(spec.training.dataset.path, "/usr/share/games/fortunes");
  EXPECT_EQ(spec.training.optimizer.name, OptimizerKind::AdamW);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.learning_rate, 0.002);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.beta2, 0.95);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.epsilon, 1e-8);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.grad_clip, 1.0);
  EXPECT_EQ(spec.training.schedule.kind, ScheduleKind::Cosine);
  EXPECT_EQ(spec.training.schedule.warmup_steps, 10);
  EXPECT_DOUBLE_EQ(spec.training.schedule.min_learning_rate_ratio, 0.1);
  EXPECT_EQ(spec.workers.per_stage, 1);
  EXPECT_EQ(spec.workers.device, "auto");
  EXPECT_EQ(spec.workers.precision, "auto");
  EXPECT_EQ(spec.workers.threads, 0);
  EXPECT_EQ(spec.trainers.count, 1);
  EXPECT_EQ(spec.trainers.inflight_microbatches, 4);
  EXPECT_DOUBLE_EQ(spec.trainers.routing.ema_alpha, 0.1);
  EXPECT_DOUBLE_EQ(spec.trainers.routing.backward_weight, 2.0);
  EXPECT_DOUBLE_EQ(spec.trainers.routing.explore_peer_seconds, 10.0);
  EXPECT_DOUBLE_EQ(spec.trainers.routing.inter_region_penalty_ms, 200.0);
  EXPECT_DOUBLE_EQ(spec.timeouts.connect_seconds, 3);
  EXPECT_DOUBLE_EQ(spec.timeouts.forward_seconds, 30);
  EXPECT_DOUBLE_EQ(spec.timeouts.backward_seconds, 60);
  EXPECT_DOUBLE_EQ(spec.timeouts.averaging_seconds, 30);
  EXPECT_DOUBLE_EQ(spec.timeouts.heartbeat_seconds, 1);
  EXPECT_DOUBLE_EQ(spec.timeouts.peer_expiry_seconds, 4);
  EXPECT_DOUBLE_EQ(spec.timeouts.activation_ttl_seconds, 120);
  EXPECT_EQ(spec.secret.env, "SWARM_JOB_SECRET");
  EXPECT_TRUE(spec.secret.secret_ref_name.empty());
  // The struct defaults are the example's values, so the whole spec equals a default JobSpec.
  EXPECT_EQ(spec, JobSpec{});
  EXPECT_TRUE(validate_job_spec(JobSpec{}).empty());
}

TEST(JobSpec, OmittedSectionsAndFieldsTakeDefaults) {
  JobSpec spec = parse_job_spec(kHeader);  // no spec at all
  JobSpec expected;
  expected.name = "t";
  EXPECT_EQ(spec, expected);

  spec = parse_job_spec(manifest("{model: {hiddenSize: 256, numHeads: 8}, training: {seed: 7}}"));
  expected.model.hidden_size = 256;
  expected.model.num_heads = 8;
  expected.training.seed = 7;
  EXPECT_EQ(spec, expected);

  // An empty section (YAML null) is the same as a missing one.
  spec = parse_job_spec(kHeader + "spec:\n  model:\n  timeouts: {}\n");
  EXPECT_EQ(spec.model, ModelSpec{});
  EXPECT_EQ(spec.timeouts, TimeoutsSpec{});
}

TEST(JobSpec, ParsesEveryValueSpelling) {
  JobSpec spec = parse_job_spec(manifest(
      "{model: {sharedLayers: true, mlpRatio: 2}, pipeline: {stages: 4, compression: blockwise8, blockSize: 256},"
      " averaging: {compression: fp16, blockSize: 65535}, training: {seed: 18446744073709551615, optimizer: {name: lamb, learningRate: 1e-3,"
      " betas: [0, .5]}, schedule: {kind: linear, warmupSteps: 0}, globalBatch: 0x40, evalBatches: 0,"
      " dataset: {path: /d, format: jsonl, textField: body, validationFraction: 0}},"
      " workers: {device: cuda, precision: bf16, threads: 0o10}, timeouts: {connectSeconds: 0.5},"
      " secret: {env: MY_SECRET, secretRef: {name: swarm.secrets, key: hmac.key}}}"));
  EXPECT_TRUE(spec.model.shared_layers);
  EXPECT_EQ(spec.model.mlp_ratio, 2);
  EXPECT_EQ(spec.pipeline.stages, 4);
  EXPECT_EQ(spec.pipeline.compression, Compression::Blockwise8);
  EXPECT_EQ(spec.pipeline.block_size, 256);
  EXPECT_EQ(spec.averaging.compression, Compression::Fp16);
  EXPECT_EQ(spec.averaging.block_size, 65535);
  EXPECT_EQ(spec.training.seed, 18446744073709551615ull);
  EXPECT_EQ(spec.training.optimizer.name, OptimizerKind::Lamb);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.beta1, 0);
  EXPECT_DOUBLE_EQ(spec.training.optimizer.beta2, 0.5);
  EXPECT_EQ(spec.training.schedule.kind, ScheduleKind::Linear);
  EXPECT_EQ(spec.training.schedule.warmup_steps, 0);
  EXPECT_EQ(spec.training.global_batch, 64);
  EXPECT_EQ(spec.training.dataset.format, DatasetFormat::Jsonl);
  EXPECT_EQ(spec.training.dataset.text_field, "body");
  EXPECT_EQ(spec.training.dataset.validation_fraction, 0);
  EXPECT_EQ(spec.workers.device, "cuda");
  EXPECT_EQ(spec.workers.precision, "bf16");
  EXPECT_EQ(spec.workers.threads, 8);
  EXPECT_DOUBLE_EQ(spec.timeouts.connect_seconds, 0.5);
  EXPECT_EQ(spec.secret.env, "MY_SECRET");
  EXPECT_EQ(spec.secret.secret_ref_name, "swarm.secrets");
  EXPECT_EQ(spec.secret.secret_ref_key, "hmac.key");
}

TEST(JobSpec, AcceptsAManifestReadBackFromKubernetes) {
  JobSpec spec = parse_job_spec(R"(apiVersion: swarm-operator.io/v1alpha1
kind: SwarmJob
metadata:
  name: tiny-lm
  namespace: research
  uid: 0f6d3c2a-1b7e-4c55-9d0e-5a8e2f1c9b3d
  resourceVersion: "48213"
  generation: 3
  creationTimestamp: "2024-05-01T12:00:00Z"
  labels: {app.kubernetes.io/name: swarm, team: ml}
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"swarm-operator.io/v1alpha1"}'
  finalizers: [swarm-operator.io/cleanup]
spec:
  pipeline: {stages: 3}
status:
  phase: Running
  step: 120
  conditions: [{type: Ready, status: "True"}]
)");
  EXPECT_EQ(spec.name, "tiny-lm");
  EXPECT_EQ(spec.namespace_, "research");
  EXPECT_EQ(spec.pipeline.stages, 3);
}

TEST(JobSpec, KubernetesOnlyFieldsAreAcceptedAndListed) {
  const JobSpec spec = load_job_spec(std::string(SWARM_SOURCE_DIR) + "/examples/local-cluster.yaml");
  EXPECT_THAT(spec.cluster_only_fields,
              ElementsAre("spec.workers.image", "spec.workers.resources", "spec.workers.maxPerStage",
                          "spec.trainers.resources", "spec.checkpoint.volumeClaimName", "spec.placement",
                          "spec.nodePools"));
  EXPECT_EQ(spec.pipeline.stages, 3);
  EXPECT_EQ(spec.workers.per_stage, 2);

  const JobSpec plain = parse_job_spec(manifest("{workers: {perStage: 2}}"));
  EXPECT_THAT(plain.cluster_only_fields, SizeIs(0));
  JobSpec with = parse_job_spec(manifest(
      "{workers: {perStage: 2, image: 'x:1', minPerStage: 1}, trainers: {image: 'y:1'}, "
      "placement: {unschedulableSeconds: 5}, nodePools: [{name: a}]}"));
  EXPECT_THAT(with.cluster_only_fields, SizeIs(5));
  EXPECT_TRUE(with.workers == plain.workers);
  EXPECT_EQ(to_json(with), to_json(plain));

  EXPECT_THAT(parse_job_spec(manifest("{checkpoint: {path: 's3://ckpt/j', s3: {credentialsSecret: c}}}"))
                  .cluster_only_fields,
              ElementsAre("spec.checkpoint.s3.credentialsSecret"));

  EXPECT_THAT(errors_of(manifest("{nodePool: []}")),
              ElementsAre(HasSubstr("spec.nodePool: unknown field (did you mean nodePools?)")));
}

TEST(JobSpec, LoadJobSpecNamesTheFile) {
  try {
    load_job_spec("/nonexistent/job.yaml");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("cannot read \"/nonexistent/job.yaml\": No such file or directory"));
  }
  try {
    load_job_spec(SWARM_SOURCE_DIR);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
  const std::string path = std::string(SWARM_BINARY_DIR) + "/common_tests_bad.yaml";
  std::ofstream(path) << manifest("{pipeline: {stages: 0}, workers: {device: tpu}}");
  try {
    load_job_spec(path);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.source(), path);
    EXPECT_THAT(e.errors(), ElementsAre(HasSubstr("spec.pipeline.stages: must be >= 2, got 0"),
                                        HasSubstr("spec.workers.device: must be one of")));
    EXPECT_THAT(e.what(), HasSubstr(path + ": spec.pipeline.stages: must be >= 2, got 0"));
    EXPECT_THAT(e.what(), HasSubstr("\n" + path + ": spec.workers.device"));
  }
  std::remove(path.c_str());
}

TEST(JobSpec, ValidateAndCheckAProgrammaticSpec) {
  JobSpec spec;
  spec.pipeline.stages = 1;
  spec.workers.device = "tpu";
  EXPECT_THAT(validate_job_spec(spec),
              ElementsAre("spec.pipeline.stages: must be >= 2, got 1",
                          "spec.workers.device: must be one of auto, cpu, cuda, got \"tpu\""));
  EXPECT_THROW(check_job_spec(spec), SpecError);
  EXPECT_NO_THROW(check_job_spec(JobSpec{}));
}

TEST(JobSpec, ResolveSecretReadsTheNamedVariable) {
  SecretSpec secret;
  secret.env = "SWARM_COMMON_TEST_SECRET";
  ::setenv("SWARM_COMMON_TEST_SECRET", "s3cr3t", 1);
  EXPECT_EQ(resolve_secret(secret), "s3cr3t");
  ::setenv("SWARM_COMMON_TEST_SECRET", "", 1);
  EXPECT_THROW(resolve_secret(secret), SpecError);
  ::unsetenv("SWARM_COMMON_TEST_SECRET");
  try {
    resolve_secret(secret);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "spec.secret.env: environment variable SWARM_COMMON_TEST_SECRET is not set or "
                 "empty");
  }
  ::unsetenv("SWARM_JOB_SECRET");
  try {
    resolve_secret(SecretSpec{});
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.errors(), ElementsAre("spec.secret.env: environment variable SWARM_JOB_SECRET "
                                        "is not set or empty"));
  }
}

TEST(JobSpec, EnumSpellingsAndNameRules) {
  EXPECT_STREQ(to_string(Compression::Blockwise8), "blockwise8");
  EXPECT_STREQ(to_string(OptimizerKind::AdamW), "adamw");
  EXPECT_STREQ(to_string(ScheduleKind::Constant), "constant");
  EXPECT_EQ(parse_compression("none"), Compression::None);
  EXPECT_EQ(parse_optimizer_kind("lamb"), OptimizerKind::Lamb);
  EXPECT_EQ(parse_schedule_kind("linear"), ScheduleKind::Linear);
  EXPECT_EQ(parse_optimizer_kind("AdamW"), std::nullopt);
  EXPECT_TRUE(is_dns1123_label("tiny-lm-0"));
  EXPECT_FALSE(is_dns1123_label("tiny-"));
  EXPECT_FALSE(is_dns1123_label("a.b"));
  EXPECT_FALSE(is_dns1123_label(std::string(64, 'a')));
  EXPECT_TRUE(is_dns1123_subdomain("a.b-c.d"));
  EXPECT_FALSE(is_dns1123_subdomain("a..b"));
}

}  // namespace
}  // namespace swarm
