// common/hf_job.h: the SwarmJob `swarm job from-hf` writes for a config.json (its manifest parses
// back to the same job and validates), and each way a spec's model can differ from the
// checkpoint's, named with both fields and both values.
#include "common/hf_job.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace swarm {
namespace {

// Llama 3.2 1B's config.json (legacy rope keys, tied embeddings).
HfModelConfig llama32() {
  return parse_hf_config(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 131072,
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "vocab_size": 128256})",
                         "ckpt/config.json");
}

FromHfOptions options() {
  FromHfOptions o;
  o.dir = "/models/llama-3.2-1b";
  o.name = "llama-ft";
  o.layers_per_stage = {6, 6, 4};
  o.tokenizer_model = "/models/llama-3.2-1b/tokenizer.model";
  o.dataset = "/data/text";
  return o;
}

TEST(HfJob, TheJobCarriesConfigJsonAndValidates) {
  const HfModelConfig hf = llama32();
  const JobSpec job = job_from_hf(hf, options());
  EXPECT_EQ(job.model.architecture, Architecture::Llama);
  EXPECT_EQ(job.model.vocab_size, 128256);
  EXPECT_EQ(job.model.num_key_value_heads, 8);
  EXPECT_EQ(job.model.head_dim, 64);
  EXPECT_EQ(job.model.intermediate_size, 8192);
  EXPECT_EQ(job.model.sequence_length, 256);
  EXPECT_DOUBLE_EQ(job.model.rope_theta, 500000.0);
  ASSERT_TRUE(job.model.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(job.model.rope_scaling->factor, 32.0);
  ASSERT_TRUE(job.model.init.has_value());
  EXPECT_EQ(job.model.init->from, "/models/llama-3.2-1b");
  EXPECT_EQ(job.pipeline.stages, 3);
  EXPECT_EQ(job.pipeline.layers_per_stage, (std::vector<int64_t>{6, 6, 4}));
  EXPECT_EQ(job.training.tokenizer.kind, TokenizerKind::SentencePiece);
  EXPECT_TRUE(validate_job_spec(job).empty()) << testing::PrintToString(validate_job_spec(job));
  EXPECT_TRUE(hf_model_mismatches(job, hf, "ckpt/config.json").empty())
      << testing::PrintToString(hf_model_mismatches(job, hf, "ckpt/config.json"));
}

TEST(HfJob, TheManifestParsesBackToTheSameJob) {
  const HfModelConfig hf = llama32();
  for (bool sentencepiece : {true, false}) {
    FromHfOptions o = options();
    if (!sentencepiece) {
      o.tokenizer_model.clear();
      o.tokenizer_json = "/models/llama-3.2-1b/tokenizer.json";
    }
    const JobSpec job = job_from_hf(hf, o);
    EXPECT_EQ(job.training.tokenizer.kind, sentencepiece ? TokenizerKind::SentencePiece : TokenizerKind::HuggingFace);
    EXPECT_EQ(job.training.tokenizer.file, sentencepiece ? "" : o.tokenizer_json);
    EXPECT_TRUE(validate_job_spec(job).empty()) << testing::PrintToString(validate_job_spec(job));
    const std::string yaml = hf_job_yaml(job, hf, o);
    const JobSpec back = parse_job_spec(yaml);
    EXPECT_EQ(back.name, job.name);
    EXPECT_EQ(back.model, job.model) << yaml;
    EXPECT_EQ(back.pipeline, job.pipeline) << yaml;
    EXPECT_EQ(back.training, job.training) << yaml;
    EXPECT_NE(yaml.find("tie_word_embeddings"), std::string::npos) << "the untying is said in the manifest";
    EXPECT_EQ(yaml.find("pre-tokenize") != std::string::npos, !sentencepiece) << yaml;
  }
}

// SmolLM2-135M's config.json: no rope scaling ("rope_scaling": null). The job from-hf writes for it
// must fit it: an unscaled spec and an unscaled checkpoint agree (they were once told apart as
// "left out" against "none", and every worker refused the checkpoint before training).
TEST(HfJob, AnUnscaledCheckpointFitsItsOwnJob) {
  const HfModelConfig hf = parse_hf_config(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
    "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
    "head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 100000.0, "max_position_embeddings": 8192,
    "vocab_size": 49152, "hidden_act": "silu", "rope_scaling": null, "tie_word_embeddings": true})",
                                           "smollm2/config.json");
  FromHfOptions o = options();
  o.layers_per_stage = {12, 13, 5};
  const JobSpec job = job_from_hf(hf, o);
  EXPECT_FALSE(job.model.rope_scaling.has_value());
  EXPECT_TRUE(hf_model_mismatches(job, hf, "smollm2/config.json").empty())
      << testing::PrintToString(hf_model_mismatches(job, hf, "smollm2/config.json"));
  // Scaled against unscaled is still a mismatch (the other way round: EachMismatchNamesBoth...).
  JobSpec scaled = job;
  scaled.model.rope_scaling = job_from_hf(llama32(), options()).model.rope_scaling;
  const auto m = hf_model_mismatches(scaled, hf, "smollm2/config.json");
  ASSERT_EQ(m.size(), 1u) << testing::PrintToString(m);
  EXPECT_EQ(m[0], "spec.model.ropeScaling is llama3, smollm2/config.json has rope scaling none");
}

TEST(HfJob, EachMismatchNamesBothFieldsAndValues) {
  const HfModelConfig hf = llama32();
  const JobSpec job = job_from_hf(hf, options());
  const std::string c = "ckpt/config.json";
  auto one = [&](auto change) {
    JobSpec s = job;
    change(s);
    const auto m = hf_model_mismatches(s, hf, c);
    return m.size() == 1 ? m[0] : testing::PrintToString(m);
  };
  EXPECT_EQ(one([](JobSpec& s) { s.pipeline.layers_per_stage = {6, 6, 5}; }),
            "the stages' layers (spec.pipeline.layersPerStage or spec.model.layersPerStage) sum to 17, " + c +
                " has num_hidden_layers 16");
  EXPECT_EQ(one([](JobSpec& s) { s.model.vocab_size = 32000; }), "spec.model.vocabSize is 32000, " + c + " has vocab_size 128256");
  EXPECT_EQ(one([](JobSpec& s) { s.model.hidden_size = 1024; }), "spec.model.hiddenSize is 1024, " + c + " has hidden_size 2048");
  EXPECT_EQ(one([](JobSpec& s) { s.model.num_heads = 16; }),
            "spec.model.numHeads is 16, " + c + " has num_attention_heads 32");
  EXPECT_EQ(one([](JobSpec& s) { s.model.num_key_value_heads = 4; }),
            "spec.model.numKeyValueHeads is 4, " + c + " has num_key_value_heads 8");
  EXPECT_EQ(one([](JobSpec& s) { s.model.head_dim = 128; }), "spec.model.headDim is 128, " + c + " has head_dim 64");
  JobSpec derived = job;
  derived.model.intermediate_size = 0;  // mlpRatio * hiddenSize = 4 * 2048: agrees
  EXPECT_TRUE(hf_model_mismatches(derived, hf, c).empty()) << testing::PrintToString(hf_model_mismatches(derived, hf, c));
  EXPECT_EQ(one([](JobSpec& s) { s.model.intermediate_size = 5632; }),
            "spec.model.intermediateSize is 5632, " + c + " has intermediate_size 8192");
  EXPECT_EQ(one([](JobSpec& s) { s.model.norm_eps = 1e-6; }), "spec.model.normEps is 1e-06, " + c + " has rms_norm_eps 1e-05");
  EXPECT_EQ(one([](JobSpec& s) { s.model.rope_theta = 10000; }),
            "spec.model.ropeTheta is 10000.0, " + c + " has rope_theta 500000.0");
  EXPECT_EQ(one([](JobSpec& s) { s.model.rope_scaling.reset(); }),
            "spec.model.ropeScaling is left out, " + c + " has rope scaling llama3");
  EXPECT_EQ(one([](JobSpec& s) { s.model.rope_scaling->factor = 8; }),
            "spec.model.ropeScaling.factor is 8.0, " + c + " has rope factor 32.0");
  EXPECT_EQ(one([](JobSpec& s) { s.model.attention_bias = true; }),
            "spec.model.attentionBias is true, " + c + " has attention_bias false");
  EXPECT_EQ(one([](JobSpec& s) { s.model.architecture = Architecture::Gpt2; }),
            "spec.model.architecture is gpt2, " + c + " has model_type llama");
}

}  // namespace
}  // namespace swarm
