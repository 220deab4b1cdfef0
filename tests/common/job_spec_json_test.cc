// JobSpec <-> JSON: the form the spec takes on a worker's command line, over HTTP, and from the
// Kubernetes API server.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "common/job_spec_json.h"

namespace swarm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

const std::string kExample = std::string(SWARM_SOURCE_DIR) + "/examples/tiny-lm.yaml";

std::vector<std::string> json_errors_of(const json& manifest) {
  try {
    job_spec_from_json(manifest);
  } catch (const SpecError& e) {
    return e.errors();
  }
  ADD_FAILURE() << "parsed without error:\n" << manifest.dump(2);
  return {};
}

JobSpec everything_changed() {
  JobSpec s;
  s.name = "big-run";
  s.namespace_ = "research";
  s.model = {Architecture::Gpt2, 50257, 1024, 16, 6, 1024, 8, true};
  s.model.intermediate_size = 3000;
  s.model.norm_eps = 1e-6;
  s.pipeline = {8, Compression::Blockwise8};
  s.pipeline.recompute_activations = true;
  s.training.global_batch = 512;
  s.training.microbatch = 16;
  s.training.max_steps = 100000;
  s.training.seed = 18446744073709551615ull;
  s.training.dataset.path = "/data/openwebtext";
  s.training.optimizer = {OptimizerKind::Lamb, 0.1, 0.85, 0.999, 1e-6, 0.0, 0.0};
  s.training.schedule = {ScheduleKind::Linear, 2000, 0.0};
  s.workers = {4, "cuda", "bf16", 16};
  s.trainers = {32, 8, {0.25, 1.5, 0.5, 20}};
  s.timeouts = {1.5, 10, 20, 45, 0.25, 2.75, 600};
  s.secret = {"HMAC_KEY", "swarm-secret", "hmac"};
  s.checkpoint = {"s3://ckpt/jobs", 10, 3, {"http://minio:9000", "eu-west-1", true, 32}};
  return s;
}

// Object storage settings, refused by field (more cases in job_spec_test.cc).
TEST(JobSpecJson, ObjectStorageCheckpointSettingsAreCheckedByName) {
  json j = to_json(JobSpec{});
  j["spec"]["checkpoint"]["path"] = "gs://bucket/x";
  EXPECT_THAT(json_errors_of(j),
              ElementsAre("spec.checkpoint.path: must be a directory or s3://bucket[/prefix], got \"gs://bucket/x\""));
  j["spec"]["checkpoint"]["path"] = "s3://bucket";
  j["spec"]["checkpoint"]["s3"] = {{"region", "eu west"}};
  EXPECT_THAT(json_errors_of(j), ElementsAre("spec.checkpoint.s3.region: must be letters, digits and '-', got \"eu west\""));
}

TEST(JobSpecJson, RoundTripsEveryField) {
  for (const JobSpec& spec : {JobSpec{}, everything_changed()}) {
    EXPECT_TRUE(validate_job_spec(spec).empty());
    json j = to_json(spec);
    EXPECT_EQ(job_spec_from_json(j), spec);
    EXPECT_EQ(job_spec_from_json(json::parse(j.dump())), spec);  // through text
    EXPECT_EQ(to_json(job_spec_from_json(j)), j);
    EXPECT_EQ(parse_job_spec(j.dump(2)), spec);  // JSON is YAML
    json via_adl = spec;
    EXPECT_EQ(via_adl.get<JobSpec>(), spec);
  }
  EXPECT_NE(everything_changed(), JobSpec{});
}

TEST(JobSpecJson, UsesTheYamlKeysAndIncludesDefaults) {
  json j = to_json(JobSpec{});
  EXPECT_EQ(j["apiVersion"], "swarm-operator.io/v1alpha1");
  EXPECT_EQ(j["kind"], "SwarmJob");
  EXPECT_EQ(j["metadata"], (json{{"name", "tiny-lm"}, {"namespace", "default"}}));
  const json& s = j["spec"];
  EXPECT_EQ(s["model"]["hiddenSize"], 192);
  EXPECT_EQ(s["model"]["sharedLayers"], false);
  EXPECT_EQ(s["pipeline"]["compression"], "none");
  EXPECT_EQ(s["pipeline"]["recomputeActivations"], false);
  EXPECT_EQ(s["workers"]["device"], "auto");
  EXPECT_EQ(s["workers"]["precision"], "auto");
  EXPECT_EQ(s["training"]["optimizer"]["name"], "adamw");
  EXPECT_EQ(s["training"]["optimizer"]["betas"], (json{0.9, 0.95}));
  EXPECT_EQ(s["training"]["schedule"]["kind"], "cosine");
  EXPECT_EQ(s["training"]["dataset"]["path"], "/usr/share/games/fortunes");
  EXPECT_EQ(s["trainers"]["routing"]["explorePeerSeconds"], 10.0);
  EXPECT_EQ(s["trainers"]["routing"]["interRegionPenaltyMs"], 200.0);
  EXPECT_EQ(s["timeouts"]["activationTtlSeconds"], 120.0);
  EXPECT_EQ(s["secret"], (json{{"env", "SWARM_JOB_SECRET"}}));  // no secretRef unless set
  EXPECT_EQ(to_json(everything_changed())["spec"]["secret"]["secretRef"],
            (json{{"name", "swarm-secret"}, {"key", "hmac"}}));
  // Same keys as the bundled example, everywhere.
  EXPECT_EQ(to_json(load_job_spec(kExample)), j);
}

TEST(JobSpecJson, AppliesTheSameValidation) {
  struct Case {
    std::string pointer;
    json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/spec/pipeline/stages", 0, "spec.pipeline.stages: must be >= 2, got 0"},
      {"/spec/pipeline/stages", "two", "spec.pipeline.stages: expected an integer, got \"two\""},
      {"/spec/pipeline/stages", 2.5, "spec.pipeline.stages: expected an integer, got 2.5"},
      {"/spec/model/hiddenSize", 1e30, "spec.model.hiddenSize: integer out of range, got 1e+30"},
      {"/spec/training/optimizer/name", "sgd",
       "spec.training.optimizer.name: must be one of adamw, lamb, got \"sgd\""},
      {"/spec/training/optimizer/betas", json{0.9, 0.95, 0.99},
       "spec.training.optimizer.betas: expected a list of two numbers, got [0.9,0.95,0.99]"},
      {"/spec/training/optimizer/betas/0", 1.0,
       "spec.training.optimizer.betas[0]: must be < 1, got 1"},
      {"/spec/timeouts/peerExpirySeconds", 0.5,
       "spec.timeouts.peerExpirySeconds: must be > spec.timeouts.heartbeatSeconds (1), got 0.5"},
      {"/spec/workers/device", nullptr, ""},  // null = default: valid
      {"/spec/workers/precision", nullptr, ""},
      {"/spec/workers/precision", "fp64",
       "spec.workers.precision: must be one of auto, fp32, bf16, fp16, got \"fp64\""},
      {"/spec/workers/precision", 16, "spec.workers.precision: expected a string, got 16"},
      {"/spec/model/hiddenSiz",
       1, "spec.model.hiddenSiz: unknown field (did you mean hiddenSize?)"},
      {"/metadata/name", "", "metadata.name: must not be empty"},
      {"/spec/secret", "abc", "spec.secret: expected an object, got \"abc\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    json j = to_json(JobSpec{});
    j[json::json_pointer(c.pointer)] = c.value;
    if (c.expected.empty()) {
      EXPECT_NO_THROW(job_spec_from_json(j));
      continue;
    }
    EXPECT_THAT(json_errors_of(j), ElementsAre(HasSubstr(c.expected)));
  }
  // Whole numbers written as floats are fine for integer fields; integers for float fields.
  json j = to_json(JobSpec{});
  j["spec"]["pipeline"]["stages"] = 3.0;
  j["spec"]["timeouts"]["connectSeconds"] = 5;
  JobSpec spec = job_spec_from_json(j);
  EXPECT_EQ(spec.pipeline.stages, 3);
  EXPECT_DOUBLE_EQ(spec.timeouts.connect_seconds, 5.0);
  // A manifest as the API server sends it: status and server-set metadata are ignored.
  j["status"] = {{"phase", "Running"}};
  j["metadata"]["uid"] = "abc";
  j["metadata"]["generation"] = 2;
  j["metadata"]["managedFields"] = json::array();
  EXPECT_NO_THROW(job_spec_from_json(j));
  EXPECT_THAT(json_errors_of(json::array()),
              ElementsAre(HasSubstr("expected a SwarmJob manifest")));
}

}  // namespace
}  // namespace swarm
