// ModelConfig: the shape of the staged transformer LM (spec.model + spec.pipeline).
//
// The architecture is data: an enum, one hyper-parameter struct per architecture (Gpt2Params,
// LlamaParams; only the one `architecture` names is read) and, in arch_table.h, one table of
// tensor names per architecture. Stage s holds stage_layers[s] decoder layers; its layers keep
// their *global* indices first_layer(s) .. first_layer(s) + stage_layers[s] - 1 everywhere (names,
// initialization, checkpoints, Hugging Face's model.layers.{i}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace swarm::model {

enum class Architecture : uint8_t { Gpt2 = 0, Llama = 1 };

// "gpt2" / "llama".
const char* architecture_name(Architecture a);

// GPT-2: pre-LayerNorm block, learned positions, fused QKV and MLP with biases, exact GELU.
struct Gpt2Params {
  int64_t intermediate_size = 768;  // MLP width (fc1 rows)
  bool shared_layers = false;       // ALBERT-style: one block per stage, applied stage_layers[s] times
  double layer_norm_eps = 1e-5;

  friend bool operator==(const Gpt2Params& a, const Gpt2Params& b) {
    return a.intermediate_size == b.intermediate_size && a.shared_layers == b.shared_layers &&
           a.layer_norm_eps == b.layer_norm_eps;
  }
};

// Llama 3's frequency-dependent scaling of the rotary frequencies (Hugging Face rope_type
// "llama3"); factor 0: none.
struct RopeScaling {
  double factor = 0;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;

  bool enabled() const { return factor > 0; }
  friend bool operator==(const RopeScaling& a, const RopeScaling& b) {
    return a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
           a.high_freq_factor == b.high_freq_factor &&
           a.original_max_position_embeddings == b.original_max_position_embeddings;
  }
};

// Llama: RMSNorm, rotary positions (rotate-half), grouped-query attention, SwiGLU MLP, untied head.
struct LlamaParams {
  int64_t intermediate_size = 512;  // SwiGLU width (gate/up rows)
  int64_t num_kv_heads = 6;         // a divisor of num_heads
  int64_t head_dim = 32;            // even; q has num_heads * head_dim rows
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  bool attention_bias = false;  // q/k/v/o biases
  bool mlp_bias = false;        // gate/up/down biases

  friend bool operator==(const LlamaParams& a, const LlamaParams& b) {
    return a.intermediate_size == b.intermediate_size && a.num_kv_heads == b.num_kv_heads &&
           a.head_dim == b.head_dim && a.rms_norm_eps == b.rms_norm_eps && a.rope_theta == b.rope_theta &&
           a.rope_scaling == b.rope_scaling && a.attention_bias == b.attention_bias && a.mlp_bias == b.mlp_bias;
  }
};

struct ModelConfig {
  Architecture architecture = Architecture::Gpt2;
  int64_t vocab_size = 256;
  int64_t hidden_size = 192;
  int64_t num_heads = 6;
  int64_t sequence_length = 128;  // maximum; shorter inputs are accepted
  int64_t num_stages = 2;
  std::vector<int64_t> stage_layers = {2, 2};  // decoder layers of each stage (num_stages entries)
  Gpt2Params gpt2;    // read when architecture == Gpt2
  LlamaParams llama;  // read when architecture == Llama

  bool is_llama() const { return architecture == Architecture::Llama; }
  // Every stage holding `per_stage` layers.
  void set_uniform_layers(int64_t per_stage) { stage_layers.assign(static_cast<size_t>(num_stages), per_stage); }
  int64_t layers_in(int64_t stage) const { return stage_layers.at(static_cast<size_t>(stage)); }
  int64_t first_layer(int64_t stage) const;  // global index of the stage's first layer
  int64_t total_layers() const;              // effective depth (shared blocks counted per use)
  int64_t head_dim() const;                  // per-head width
  int64_t kv_heads() const { return is_llama() ? llama.num_kv_heads : num_heads; }
  int64_t intermediate_size() const { return is_llama() ? llama.intermediate_size : gpt2.intermediate_size; }

  friend bool operator==(const ModelConfig& a, const ModelConfig& b) {
    if (a.architecture != b.architecture || a.vocab_size != b.vocab_size || a.hidden_size != b.hidden_size ||
        a.num_heads != b.num_heads || a.sequence_length != b.sequence_length || a.num_stages != b.num_stages ||
        a.stage_layers != b.stage_layers) {
      return false;
    }
    return a.is_llama() ? a.llama == b.llama : a.gpt2 == b.gpt2;
  }
  friend bool operator!=(const ModelConfig& a, const ModelConfig& b) { return !(a == b); }
};

// Throws std::invalid_argument naming the first bad field (non-positive sizes, a stage_layers
// list that does not have num_stages positive entries, gpt2's hidden_size not divisible by
// num_heads, llama's num_heads not a multiple of num_kv_heads or an odd head_dim).
void validate(const ModelConfig& config);

// One line, e.g. "gpt2 vocab=256 hidden=192 heads=6 layers=[2,2] seq=128 mlp=768 shared=0".
std::string describe(const ModelConfig& config);

}  // namespace swarm::model
