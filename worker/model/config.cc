#include "worker/model/config.h"

#include <numeric>
#include <sstream>
#include <stdexcept>

namespace swarm::model {
namespace {

void positive(int64_t v, const std::string& name) {
  if (v <= 0) {
    throw std::invalid_argument("ModelConfig." + name + " must be positive, got " + std::to_string(v));
  }
}

void check_llama(const ModelConfig& c) {
  const LlamaParams& l = c.llama;
  positive(l.intermediate_size, "llama.intermediate_size");
  positive(l.num_kv_heads, "llama.num_kv_heads");
  positive(l.head_dim, "llama.head_dim");
  if (c.num_heads % l.num_kv_heads != 0) {
    throw std::invalid_argument("ModelConfig.num_heads (" + std::to_string(c.num_heads) +
                                ") must be a multiple of llama.num_kv_heads (" + std::to_string(l.num_kv_heads) + ")");
  }
  if (l.head_dim % 2 != 0) {
    throw std::invalid_argument("ModelConfig.llama.head_dim must be even (rotary pairs), got " +
                                std::to_string(l.head_dim));
  }
  if (!(l.rms_norm_eps > 0) || !(l.rope_theta > 0)) {
    throw std::invalid_argument("ModelConfig.llama.rms_norm_eps and rope_theta must be positive");
  }
  const RopeScaling& s = l.rope_scaling;
  if (s.enabled() && (s.factor < 1 || !(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
                      s.original_max_position_embeddings <= 0)) {
    throw std::invalid_argument("ModelConfig.llama.rope_scaling needs factor >= 1, 0 < low_freq_factor < "
                                "high_freq_factor and original_max_position_embeddings > 0");
  }
}

}  // namespace

const char* architecture_name(Architecture a) { return a == Architecture::Llama ? "llama" : "gpt2"; }

int64_t ModelConfig::first_layer(int64_t stage) const {
  const auto end = stage_layers.begin() + static_cast<std::ptrdiff_t>(stage);
  return std::accumulate(stage_layers.begin(), end, int64_t{0});
}

int64_t ModelConfig::total_layers() const {
  return std::accumulate(stage_layers.begin(), stage_layers.end(), int64_t{0});
}

int64_t ModelConfig::head_dim() const {
  if (is_llama()) return llama.head_dim;
  return num_heads > 0 ? hidden_size / num_heads : 0;
}

void validate(const ModelConfig& c) {
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.num_heads, "num_heads");
  positive(c.sequence_length, "sequence_length");
  positive(c.num_stages, "num_stages");
  if (static_cast<int64_t>(c.stage_layers.size()) != c.num_stages) {
    throw std::invalid_argument("ModelConfig.stage_layers has " + std::to_string(c.stage_layers.size()) +
                                " entries, num_stages is " + std::to_string(c.num_stages));
  }
  for (size_t s = 0; s < c.stage_layers.size(); ++s) positive(c.stage_layers[s], "stage_layers[" + std::to_string(s) + "]");
  if (c.is_llama()) {
    if (c.gpt2.shared_layers) throw std::invalid_argument("ModelConfig: shared layers are gpt2 only");
    check_llama(c);
    return;
  }
  positive(c.gpt2.intermediate_size, "gpt2.intermediate_size");
  if (!(c.gpt2.layer_norm_eps > 0)) throw std::invalid_argument("ModelConfig.gpt2.layer_norm_eps must be positive");
  if (c.hidden_size % c.num_heads != 0) {
    throw std::invalid_argument("ModelConfig.hidden_size (" + std::to_string(c.hidden_size) +
                                ") must be divisible by num_heads (" + std::to_string(c.num_heads) + ")");
  }
}

std::string describe(const ModelConfig& c) {
  std::ostringstream os;
  os << architecture_name(c.architecture) << " vocab=" << c.vocab_size << " hidden=" << c.hidden_size
     << " heads=" << c.num_heads << " layers=[";
  for (size_t s = 0; s < c.stage_layers.size(); ++s) os << (s ? "," : "") << c.stage_layers[s];
  os << "] seq=" << c.sequence_length;
  if (c.is_llama()) {
    const LlamaParams& l = c.llama;
    os << " kv_heads=" << l.num_kv_heads << " head_dim=" << l.head_dim << " mlp=" << l.intermediate_size
       << " eps=" << l.rms_norm_eps << " theta=" << l.rope_theta;
    if (l.rope_scaling.enabled()) {
      os << " llama3_scaling=" << l.rope_scaling.factor << "/" << l.rope_scaling.low_freq_factor << "/"
         << l.rope_scaling.high_freq_factor << "/" << l.rope_scaling.original_max_position_embeddings;
    }
    os << " bias=" << l.attention_bias << l.mlp_bias;
  } else {
    os << " mlp=" << c.gpt2.intermediate_size << " shared=" << c.gpt2.shared_layers;
    if (c.gpt2.layer_norm_eps != 1e-5) os << " eps=" << c.gpt2.layer_norm_eps;
  }
  return os.str();
}

}  // namespace swarm::model
