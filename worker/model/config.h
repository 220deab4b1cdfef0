// ModelConfig: the shape of the staged transformer LM (spec.model + spec.pipeline.stages).
#pragma once

#include <cstdint>
#include <string>

namespace swarm::model {

struct ModelConfig {
  int64_t vocab_size = 256;
  int64_t hidden_size = 192;
  int64_t num_heads = 6;
  int64_t layers_per_stage = 2;
  int64_t sequence_length = 128;  // maximum; shorter inputs are accepted
  int64_t mlp_ratio = 4;
  int64_t num_stages = 2;
  bool shared_layers = false;  // ALBERT-style: one block reused layers_per_stage times per stage

  int64_t head_dim() const { return num_heads > 0 ? hidden_size / num_heads : 0; }
  int64_t total_layers() const { return num_stages * layers_per_stage; }  // effective depth

  friend bool operator==(const ModelConfig& a, const ModelConfig& b) {
    return a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
           a.num_heads == b.num_heads && a.layers_per_stage == b.layers_per_stage &&
           a.sequence_length == b.sequence_length && a.mlp_ratio == b.mlp_ratio &&
           a.num_stages == b.num_stages && a.shared_layers == b.shared_layers;
  }
  friend bool operator!=(const ModelConfig& a, const ModelConfig& b) { return !(a == b); }
};

// Throws std::invalid_argument naming the first bad field (non-positive sizes, hidden_size not
// divisible by num_heads).
void validate(const ModelConfig& config);

// One line, e.g. "vocab=256 hidden=192 heads=6 layers/stage=2 seq=128 mlp=4 stages=2 shared=0".
std::string describe(const ModelConfig& config);

}  // namespace swarm::model
