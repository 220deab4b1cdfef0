// common/hf_config.h: config.json of Llama-family checkpoints as transformers 4.x (legacy rope
// keys) and 5.x (rope_parameters) write them, transformers' defaults for keys left out, and a
// refusal naming the field and the value for everything that cannot be imported.
#include "common/hf_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace swarm {
namespace {

using nlohmann::json;

// A Llama 3.2-style config.json as transformers 4.4x writes it (GQA, explicit head_dim, llama3
// scaling in the legacy keys, tied embeddings).
json legacy() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0", "use_cache": true, "vocab_size": 128256})");
}

std::string error_of(const json& j) {
  try {
    parse_hf_config(j.dump(), "ckpt/config.json");
  } catch (const HfConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, LegacyRopeKeysAndLlama3Scaling) {
  const HfModelConfig c = parse_hf_config(legacy().dump(), "ckpt/config.json");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_hidden_layers, 16);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.dtype, "bfloat16");
  // The older spelling of the type ("type", transformers < 4.43) reads the same.
  json j = legacy();
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  EXPECT_TRUE(parse_hf_config(j.dump(), "c").rope_scaling.llama3);
  j["rope_scaling"] = nullptr;
  EXPECT_FALSE(parse_hf_config(j.dump(), "c").rope_scaling.llama3);
}

TEST(HfConfig, RopeParametersOfTransformers5WinOverLegacyKeys) {
  json j = legacy();
  j.erase("rope_scaling");
  j["rope_theta"] = 1.0;  // a stale legacy key: rope_parameters decides
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 250000.0}, {"factor", 8.0},
                          {"low_freq_factor", 2.0}, {"high_freq_factor", 6.0},
                          {"original_max_position_embeddings", 4096}};
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  HfModelConfig c = parse_hf_config(j.dump(), "c");
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 6.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.dtype, "float32");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  c = parse_hf_config(j.dump(), "c");
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.rope_scaling.llama3);
}

TEST(HfConfig, KeysLeftOutTakeTransformersDefaults) {
  const json j = {{"model_type", "llama"}, {"vocab_size", 32000}, {"hidden_size", 4096},
                  {"intermediate_size", 11008}, {"num_hidden_layers", 32}, {"num_attention_heads", 32}};
  const HfModelConfig c = parse_hf_config(j.dump(), "c");
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.rope_scaling.llama3);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.dtype, "");
}

TEST(HfConfig, TextThatIsNotAJsonObjectIsRefused) {
  EXPECT_THROW(parse_hf_config("{\"vocab_size\": 3", "ckpt/config.json"), HfConfigError);
  try {
    parse_hf_config("{\"vocab_size\": 3", "ckpt/config.json");
  } catch (const HfConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "ckpt/config.json: not JSON (byte 17)");
  }
  EXPECT_EQ(error_of(json::array({1, 2})), "ckpt/config.json: not a JSON object, got [1,2]");
}

TEST(HfConfig, EachMissingRequiredKeyIsNamed) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    json j = legacy();
    j.erase(key);
    EXPECT_EQ(error_of(j), std::string("ckpt/config.json: ") + key + ": missing (a Llama config.json has it)");
  }
  json j = legacy();
  j.erase("model_type");
  j.erase("architectures");
  EXPECT_EQ(error_of(j), "ckpt/config.json: model_type: missing (a Llama config.json has it)");
}

TEST(HfConfig, AnotherArchitectureOrActivationIsRefusedByName) {
  json j = legacy();
  j["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: architectures: only LlamaForCausalLM is imported (spec.model.architecture llama), "
            "got [\"GPT2LMHeadModel\"]");
  j = legacy();
  j["model_type"] = "qwen2";
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: model_type: only \"llama\" is imported (spec.model.architecture llama), got \"qwen2\"");
  j = legacy();
  j["hidden_act"] = "gelu";
  EXPECT_EQ(error_of(j), "ckpt/config.json: hidden_act: only silu (SwiGLU) is implemented, got \"gelu\"");
}

TEST(HfConfig, BadValuesAreRefusedNamingFieldAndValue) {
  json j = legacy();
  j["hidden_size"] = "2048";
  EXPECT_EQ(error_of(j), "ckpt/config.json: hidden_size: must be a positive integer up to 2147483648, got \"2048\"");
  j = legacy();
  j["num_attention_heads"] = 0;
  EXPECT_EQ(error_of(j), "ckpt/config.json: num_attention_heads: must be a positive integer up to 2147483648, got 0");
  j = legacy();
  j["num_key_value_heads"] = 5;
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: num_key_value_heads: must divide num_attention_heads (32) into equal groups, got 5");
  j = legacy();
  j.erase("head_dim");
  j["num_attention_heads"] = 24;
  j["num_key_value_heads"] = 8;
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: head_dim: missing, and hidden_size (2048) is not a multiple of num_attention_heads (24)");
  j = legacy();
  j["rms_norm_eps"] = -1;
  EXPECT_EQ(error_of(j), "ckpt/config.json: rms_norm_eps: must be a positive number, got -1");
  j = legacy();
  j["tie_word_embeddings"] = "yes";
  EXPECT_EQ(error_of(j), "ckpt/config.json: tie_word_embeddings: must be true or false, got \"yes\"");
}

TEST(HfConfig, RopeTypesWithoutAnImplementationAreRefusedByName) {
  json j = legacy();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: rope_scaling.rope_type: only the rope types default and llama3 are implemented, got \"yarn\"");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: rope_scaling.type: only the rope types default and llama3 are implemented, got \"linear\"");
  j["rope_scaling"] = {{"rope_type", "llama3"}};
  EXPECT_EQ(error_of(j), "ckpt/config.json: rope_scaling.factor: missing (llama3 scaling needs it)");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0}};
  EXPECT_EQ(error_of(j), "ckpt/config.json: rope_scaling.high_freq_factor: must be above low_freq_factor (4.0), got 1.0");
  j["rope_scaling"] = 3;
  EXPECT_EQ(error_of(j), "ckpt/config.json: rope_scaling: must be an object or null, got 3");
  j = legacy();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: rope_parameters.full_attention: per-layer-type rope parameters are not implemented, "
            "got {\"rope_type\":\"default\"}");
  j["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}};
  EXPECT_EQ(error_of(j),
            "ckpt/config.json: rope_parameters.rope_type: only the rope types default and llama3 are implemented, got "
            "\"dynamic\"");
}

}  // namespace
}  // namespace swarm
