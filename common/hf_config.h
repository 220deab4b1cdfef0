// A Hugging Face checkpoint's config.json, read for the Llama family (`model_type` "llama",
// `LlamaForCausalLM`): the sizes, the rotary embedding and the norm that decide the maths, with
// transformers' own defaults for the keys a config may leave out. Pure: the text in, a struct or
// an error out (the file is read by whoever holds it: worker/checkpoint/hf_checkpoint.h).
//
// Both spellings of the rotary settings are read: the legacy top-level `rope_theta` and
// `rope_scaling` (null, or {"rope_type" or "type": ..., ...}) of transformers 4.x, and
// `rope_parameters` ({"rope_type": ..., "rope_theta": ..., ...}) of transformers 5. A
// `rope_parameters` object wins over the legacy keys. Rope types: "default" (none) and "llama3";
// any other is refused by name (its maths is not implemented).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace swarm {

// config.json that cannot be imported; what() reads "<where>: <field>: <why>, got <value>".
struct HfConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Llama 3's frequency-dependent scaling of the rotary frequencies (rope_type "llama3").
struct HfRopeScaling {
  bool llama3 = false;  // false: unscaled ("default", or no scaling at all)
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct HfModelConfig {
  std::string architecture = "LlamaForCausalLM";  // architectures[0]
  std::string model_type = "llama";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // default num_attention_heads (no grouping)
  int64_t head_dim = 0;             // default hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  HfRopeScaling rope_scaling;
  bool tie_word_embeddings = false;  // LlamaConfig's default
  bool attention_bias = false;       // q/k/v/o projections with biases
  bool mlp_bias = false;             // gate/up/down projections with biases
  std::string dtype;                 // "dtype" (transformers 5) or "torch_dtype"; "" if absent
};

// Parses config.json's text. `where` names the file in errors (e.g. "DIR/config.json"). Throws
// HfConfigError for text that is not a JSON object, a required key missing (vocab_size,
// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads), a value of the wrong
// type or out of range, an architecture or model_type other than Llama's, an activation other
// than silu, heads that do not group (num_attention_heads % num_key_value_heads), and a rope type
// other than default and llama3.
HfModelConfig parse_hf_config(const std::string& text, const std::string& where);

}  // namespace swarm
