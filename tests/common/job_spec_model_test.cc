// spec.model's architecture fields and spec.pipeline.layersPerStage (common/job_spec_model.cc,
// common/job_spec_validate.cc): parsed from YAML and JSON, written back by to_json, and every bad
// value refused with one message naming the field and the value.
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
using ::testing::SizeIs;

std::string manifest(const std::string& spec_flow) {
  return "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: t\nspec: " + spec_flow + "\n";
}

const std::string kLlama =
    "{model: {architecture: llama, hiddenSize: 96, numHeads: 6, numKeyValueHeads: 2, headDim: 24, "
    "intermediateSize: 256, normEps: 1.0e-6, ropeTheta: 500000, ropeScaling: {type: llama3, factor: 32, "
    "lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192}, attentionBias: true, "
    "mlpBias: false, init: {from: s3://models/smollm2, format: huggingface}}, "
    "pipeline: {stages: 3, layersPerStage: [2, 4, 3]}}";

TEST(JobSpecModel, ParsesALlamaJob) {
  const JobSpec s = parse_job_spec(manifest(kLlama));
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.architecture, Architecture::Llama);
  EXPECT_EQ(m.num_key_value_heads, 2);
  EXPECT_EQ(m.head_dim, 24);
  EXPECT_EQ(m.intermediate_size, 256);
  EXPECT_DOUBLE_EQ(m.norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(m.rope_theta, 500000);
  ASSERT_TRUE(m.rope_scaling);
  EXPECT_EQ(m.rope_scaling->type, RopeScalingType::Llama3);
  EXPECT_DOUBLE_EQ(m.rope_scaling->factor, 32);
  EXPECT_DOUBLE_EQ(m.rope_scaling->low_freq_factor, 1);
  EXPECT_DOUBLE_EQ(m.rope_scaling->high_freq_factor, 4);
  EXPECT_EQ(m.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(m.attention_bias, std::optional<bool>(true));
  EXPECT_EQ(m.mlp_bias, std::optional<bool>(false));
  ASSERT_TRUE(m.init);
  EXPECT_EQ(m.init->from, "s3://models/smollm2");
  EXPECT_EQ(m.init->format, ModelFormat::HuggingFace);
  EXPECT_THAT(s.pipeline.layers_per_stage, ElementsAre(2, 4, 3));
  EXPECT_THAT(stage_layers(s), ElementsAre(2, 4, 3));
}

TEST(JobSpecModel, DefaultsAreTheGpt2JobOfBefore) {
  const JobSpec s = parse_job_spec(manifest("{}"));
  EXPECT_EQ(s.model.architecture, Architecture::Gpt2);
  EXPECT_EQ(s.model.intermediate_size, 0);
  EXPECT_EQ(s.model.num_key_value_heads, 0);
  EXPECT_EQ(s.model.head_dim, 0);
  EXPECT_DOUBLE_EQ(s.model.norm_eps, 1e-5);
  EXPECT_FALSE(s.model.rope_scaling || s.model.attention_bias || s.model.mlp_bias || s.model.init);
  EXPECT_TRUE(s.pipeline.layers_per_stage.empty());
  EXPECT_THAT(stage_layers(s), ElementsAre(2, 2));
  // The gpt2 values of the llama fields are accepted with gpt2.
  EXPECT_NO_THROW(parse_job_spec(manifest(
      "{model: {numKeyValueHeads: 6, headDim: 32, ropeTheta: 10000, attentionBias: true, mlpBias: true}}")));
  // One field switches the default job to llama.
  const JobSpec llama = parse_job_spec(manifest("{model: {architecture: llama}}"));
  EXPECT_EQ(llama.model.architecture, Architecture::Llama);
}

TEST(JobSpecModel, RoundTripsThroughJson) {
  const JobSpec s = parse_job_spec(manifest(kLlama));
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["spec"]["model"]["architecture"], "llama");
  EXPECT_EQ(j["spec"]["model"]["ropeScaling"]["type"], "llama3");
  EXPECT_EQ(j["spec"]["model"]["init"]["format"], "huggingface");
  EXPECT_EQ(j["spec"]["pipeline"]["layersPerStage"], nlohmann::json::array({2, 4, 3}));
  EXPECT_EQ(job_spec_from_json(j), s);
  EXPECT_EQ(parse_job_spec(j.dump()), s);
  // A gpt2 job writes no llama-only object.
  const nlohmann::json d = to_json(JobSpec{});
  for (const char* key : {"ropeScaling", "attentionBias", "mlpBias", "init"}) {
    EXPECT_FALSE(d["spec"]["model"].contains(key)) << key;
  }
  EXPECT_EQ(job_spec_from_json(d), JobSpec{});
}

struct Refused {
  std::string spec;
  std::string expected;
};

// Every new field, with a value of the wrong type or outside its rule: one message naming the
// field and the value.
TEST(JobSpecModel, EachBadValueNamesItsField) {
  const std::string llama = "architecture: llama, ";
  const std::vector<Refused> cases = {
      {"{model: {architecture: mamba}}", "spec.model.architecture: must be one of gpt2, llama, got \"mamba\""},
      {"{model: {intermediateSize: -1}}", "spec.model.intermediateSize: must be >= 0, got -1"},
      {"{model: {intermediateSize: big}}", "spec.model.intermediateSize: expected an integer, got \"big\""},
      {"{model: {numKeyValueHeads: 300}}", "spec.model.numKeyValueHeads: must be <= 256, got 300"},
      {"{model: {headDim: 2000}}", "spec.model.headDim: must be <= 1024, got 2000"},
      {"{model: {normEps: 0}}", "spec.model.normEps: must be > 0, got 0"},
      {"{model: {normEps: 0.5}}", "spec.model.normEps: must be <= 0.1, got 0.5"},
      {"{model: {" + llama + "ropeTheta: -1}}", "spec.model.ropeTheta: must be > 0, got -1"},
      {"{model: {" + llama + "ropeScaling: {type: yarn}}}",
       "spec.model.ropeScaling.type: must be one of llama3, got \"yarn\""},
      {"{model: {" + llama + "ropeScaling: {factor: 0.5}}}", "spec.model.ropeScaling.factor: must be >= 1, got 0.5"},
      {"{model: {" + llama + "ropeScaling: {lowFreqFactor: 0}}}",
       "spec.model.ropeScaling.lowFreqFactor: must be > 0, got 0"},
      {"{model: {" + llama + "ropeScaling: {lowFreqFactor: 4, highFreqFactor: 2}}}",
       "spec.model.ropeScaling.highFreqFactor: must be > spec.model.ropeScaling.lowFreqFactor (4), got 2"},
      {"{model: {" + llama + "ropeScaling: {originalMaxPositionEmbeddings: 0}}}",
       "spec.model.ropeScaling.originalMaxPositionEmbeddings: must be >= 1, got 0"},
      {"{model: {" + llama + "ropeScaling: {factr: 8}}}", "spec.model.ropeScaling.factr: unknown field (did you mean factor?)"},
      {"{model: {attentionBias: yes}}", "spec.model.attentionBias: expected a boolean (true or false), got \"yes\""},
      {"{model: {mlpBias: 1}}", "spec.model.mlpBias: expected a boolean (true or false), got 1"},
      {"{model: {" + llama + "init: {}}}", "spec.model.init.from: required"},
      {"{model: {" + llama + "init: {from: \"\"}}}", "spec.model.init.from: must not be empty"},
      {"{model: {" + llama + "init: {from: /m, format: gguf}}}",
       "spec.model.init.format: must be one of huggingface, got \"gguf\""},
      {"{model: {" + llama + "init: {from: \"s3://ab/m\"}}}",
       "spec.model.init.from: bucket must have 3 to 63 characters, got \"ab\""},
      {"{model: {" + llama + "init: /m}}", "spec.model.init: expected an object, got \"/m\""},
      // llama's own rules.
      {"{model: {" + llama + "numHeads: 6, numKeyValueHeads: 4}}",
       "spec.model.numKeyValueHeads: must divide spec.model.numHeads (6), got 4"},
      {"{model: {" + llama + "headDim: 33}}", "spec.model.headDim: must be even (rotary embeddings turn pairs of values), got 33"},
      {"{model: {" + llama + "hiddenSize: 30, numHeads: 2}}",
       "spec.model.headDim: left out, it is hiddenSize / numHeads = 15, which must be even"},
      {"{model: {" + llama + "sharedLayers: true}}",
       "spec.model.sharedLayers: ALBERT-style sharing needs spec.model.architecture gpt2 (this job's is llama), got true"},
      // Fields gpt2 does not have.
      {"{model: {numKeyValueHeads: 2}}",
       "spec.model.numKeyValueHeads: grouped-query attention needs spec.model.architecture llama (this job's is "
       "gpt2): leave it out, got 2"},
      {"{model: {headDim: 64}}", "spec.model.headDim: a head width other than hiddenSize / numHeads needs "
                                 "spec.model.architecture llama (this job's is gpt2): leave it out, got 64"},
      {"{model: {ropeTheta: 500000}}", "spec.model.ropeTheta: rotary positions needs spec.model.architecture llama"},
      {"{model: {ropeScaling: {factor: 8}}}", "spec.model.ropeScaling: rotary scaling needs spec.model.architecture llama"},
      {"{model: {attentionBias: false}}", "spec.model.attentionBias: gpt2 blocks always have attention biases"},
      {"{model: {mlpBias: false}}", "spec.model.mlpBias: gpt2 blocks always have MLP biases"},
      {"{model: {init: {from: /m}}}", "spec.model.init: importing a Hugging Face checkpoint needs "
                                      "spec.model.architecture llama (this job's is gpt2) (Llama-family "
                                      "checkpoints), got from \"/m\""},
      // Uneven stages.
      {"{pipeline: {stages: 3, layersPerStage: [2, 2]}}",
       "spec.pipeline.layersPerStage: needs one count per stage (spec.pipeline.stages is 3), got 2"},
      {"{pipeline: {layersPerStage: [2, 0]}}", "spec.pipeline.layersPerStage[1]: must be >= 1, got 0"},
      {"{pipeline: {layersPerStage: [2, 300]}}", "spec.pipeline.layersPerStage[1]: must be <= 256, got 300"},
      {"{pipeline: {layersPerStage: [2, x]}}", "spec.pipeline.layersPerStage[1]: expected an integer, got \"x\""},
      {"{pipeline: {layersPerStage: 4}}", "spec.pipeline.layersPerStage: expected a list of integers, got 4"},
      {"{model: {layersPerStage: 4}, pipeline: {layersPerStage: [2, 3]}}",
       "spec.model.layersPerStage: must be left out when spec.pipeline.layersPerStage gives each stage's layers, got 4"},
  };
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.spec);
    try {
      parse_job_spec(manifest(c.spec));
      ADD_FAILURE() << "accepted";
    } catch (const SpecError& e) {
      ASSERT_THAT(e.errors(), SizeIs(1)) << e.what();
      EXPECT_THAT(e.errors()[0], HasSubstr(c.expected));
    }
  }
}

// The same rules hold for the JSON the operator hands to the pods.
TEST(JobSpecModel, JsonFrontEndAppliesTheSameRules) {
  nlohmann::json j = to_json(JobSpec{});
  j["spec"]["model"]["architecture"] = "llama";
  j["spec"]["model"]["numKeyValueHeads"] = 4;
  try {
    job_spec_from_json(j);
    ADD_FAILURE() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.errors(), ElementsAre(HasSubstr("spec.model.numKeyValueHeads: must divide spec.model.numHeads (6), got 4")));
  }
}

}  // namespace
}  // namespace swarm
