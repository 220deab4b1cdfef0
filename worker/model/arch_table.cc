#include "worker/model/arch_table.h"

#include <stdexcept>
#include <utility>

namespace swarm::model {
namespace {

using P = TensorPart;
using D = Dim;
constexpr Presence kAlways = Presence::Always;

const std::vector<TensorRule> kLlama = {
    {P::Embedding, "embed.tokens", "model.embed_tokens.weight", D::Vocab, D::Hidden, false, kAlways},
    {P::Layer, "attn_norm", "model.layers.{}.input_layernorm.weight", D::Hidden, D::None, false, kAlways},
    {P::Layer, "q_weight", "model.layers.{}.self_attn.q_proj.weight", D::QueryWidth, D::Hidden, false, kAlways},
    {P::Layer, "q_bias", "model.layers.{}.self_attn.q_proj.bias", D::QueryWidth, D::None, false, Presence::AttentionBias},
    {P::Layer, "k_weight", "model.layers.{}.self_attn.k_proj.weight", D::KvWidth, D::Hidden, false, kAlways},
    {P::Layer, "k_bias", "model.layers.{}.self_attn.k_proj.bias", D::KvWidth, D::None, false, Presence::AttentionBias},
    {P::Layer, "v_weight", "model.layers.{}.self_attn.v_proj.weight", D::KvWidth, D::Hidden, false, kAlways},
    {P::Layer, "v_bias", "model.layers.{}.self_attn.v_proj.bias", D::KvWidth, D::None, false, Presence::AttentionBias},
    {P::Layer, "o_weight", "model.layers.{}.self_attn.o_proj.weight", D::Hidden, D::QueryWidth, false, kAlways},
    {P::Layer, "o_bias", "model.layers.{}.self_attn.o_proj.bias", D::Hidden, D::None, false, Presence::AttentionBias},
    {P::Layer, "mlp_norm", "model.layers.{}.post_attention_layernorm.weight", D::Hidden, D::None, false, kAlways},
    {P::Layer, "gate_weight", "model.layers.{}.mlp.gate_proj.weight", D::Intermediate, D::Hidden, false, kAlways},
    {P::Layer, "gate_bias", "model.layers.{}.mlp.gate_proj.bias", D::Intermediate, D::None, false, Presence::MlpBias},
    {P::Layer, "up_weight", "model.layers.{}.mlp.up_proj.weight", D::Intermediate, D::Hidden, false, kAlways},
    {P::Layer, "up_bias", "model.layers.{}.mlp.up_proj.bias", D::Intermediate, D::None, false, Presence::MlpBias},
    {P::Layer, "down_weight", "model.layers.{}.mlp.down_proj.weight", D::Hidden, D::Intermediate, false, kAlways},
    {P::Layer, "down_bias", "model.layers.{}.mlp.down_proj.bias", D::Hidden, D::None, false, Presence::MlpBias},
    {P::Head, "head.norm_weight", "model.norm.weight", D::Hidden, D::None, false, kAlways},
    {P::Head, "head.weight", "lm_head.weight", D::Vocab, D::Hidden, false, kAlways},
};

const std::vector<TensorRule> kGpt2 = {
    {P::Embedding, "embed.tokens", "transformer.wte.weight", D::Vocab, D::Hidden, false, kAlways},
    {P::Embedding, "embed.positions", "transformer.wpe.weight", D::Sequence, D::Hidden, false, kAlways},
    {P::Layer, "ln1_weight", "transformer.h.{}.ln_1.weight", D::Hidden, D::None, false, kAlways},
    {P::Layer, "ln1_bias", "transformer.h.{}.ln_1.bias", D::Hidden, D::None, false, kAlways},
    {P::Layer, "qkv_weight", "transformer.h.{}.attn.c_attn.weight", D::FusedQkv, D::Hidden, true, kAlways},
    {P::Layer, "qkv_bias", "transformer.h.{}.attn.c_attn.bias", D::FusedQkv, D::None, false, kAlways},
    {P::Layer, "proj_weight", "transformer.h.{}.attn.c_proj.weight", D::Hidden, D::Hidden, true, kAlways},
    {P::Layer, "proj_bias", "transformer.h.{}.attn.c_proj.bias", D::Hidden, D::None, false, kAlways},
    {P::Layer, "ln2_weight", "transformer.h.{}.ln_2.weight", D::Hidden, D::None, false, kAlways},
    {P::Layer, "ln2_bias", "transformer.h.{}.ln_2.bias", D::Hidden, D::None, false, kAlways},
    {P::Layer, "fc1_weight", "transformer.h.{}.mlp.c_fc.weight", D::Intermediate, D::Hidden, true, kAlways},
    {P::Layer, "fc1_bias", "transformer.h.{}.mlp.c_fc.bias", D::Intermediate, D::None, false, kAlways},
    {P::Layer, "fc2_weight", "transformer.h.{}.mlp.c_proj.weight", D::Hidden, D::Intermediate, true, kAlways},
    {P::Layer, "fc2_bias", "transformer.h.{}.mlp.c_proj.bias", D::Hidden, D::None, false, kAlways},
    {P::Head, "head.ln_weight", "transformer.ln_f.weight", D::Hidden, D::None, false, kAlways},
    {P::Head, "head.ln_bias", "transformer.ln_f.bias", D::Hidden, D::None, false, kAlways},
    {P::Head, "head.weight", "lm_head.weight", D::Vocab, D::Hidden, false, kAlways},
};

int64_t size_of(const ModelConfig& c, Dim d) {
  switch (d) {
    case Dim::None: return 0;
    case Dim::Vocab: return c.vocab_size;
    case Dim::Hidden: return c.hidden_size;
    case Dim::Sequence: return c.sequence_length;
    case Dim::QueryWidth: return c.num_heads * c.head_dim();
    case Dim::KvWidth: return c.kv_heads() * c.head_dim();
    case Dim::Intermediate: return c.intermediate_size();
    case Dim::FusedQkv: return 3 * c.hidden_size;
  }
  return 0;
}

bool present(const ModelConfig& c, Presence p) {
  switch (p) {
    case Presence::Always: return true;
    case Presence::AttentionBias: return c.is_llama() && c.llama.attention_bias;
    case Presence::MlpBias: return c.is_llama() && c.llama.mlp_bias;
  }
  return false;
}

std::string with_layer(const std::string& pattern, int64_t layer) {
  std::string out = pattern;
  const auto at = out.find("{}");
  if (at != std::string::npos) out.replace(at, 2, std::to_string(layer));
  return out;
}

StageTensor make_tensor(const ModelConfig& c, const TensorRule& r, const std::string& internal, int64_t layer) {
  StageTensor t;
  t.internal = internal;
  t.hf = with_layer(r.hf, layer);
  t.shape.push_back(size_of(c, r.rows));
  if (r.cols != Dim::None) t.shape.push_back(size_of(c, r.cols));
  t.transposed = r.transposed;
  t.hf_shape = t.shape;
  if (r.transposed) std::swap(t.hf_shape.front(), t.hf_shape.back());
  return t;
}

}  // namespace

const std::vector<TensorRule>& tensor_rules(Architecture a) { return a == Architecture::Llama ? kLlama : kGpt2; }

std::vector<StageTensor> stage_tensors(const ModelConfig& c, int64_t stage) {
  if (stage < 0 || stage >= c.num_stages) {
    throw std::invalid_argument("stage " + std::to_string(stage) + " outside [0, " + std::to_string(c.num_stages) + ")");
  }
  if (!c.is_llama() && c.gpt2.shared_layers) {
    throw std::invalid_argument("gpt2 with shared layers (ALBERT-style: one block reused by every layer of a "
                                "stage) has no Hugging Face counterpart: GPT-2 has a block per layer");
  }
  const auto& rules = tensor_rules(c.architecture);
  std::vector<StageTensor> out;
  auto add_part = [&](TensorPart part, int64_t layer, const std::string& prefix) {
    for (const TensorRule& r : rules) {
      if (r.part == part && present(c, r.presence)) out.push_back(make_tensor(c, r, prefix + r.internal, layer));
    }
  };
  if (stage == 0) add_part(TensorPart::Embedding, -1, "");
  for (int64_t j = 0; j < c.layers_in(stage); ++j) {
    const int64_t layer = c.first_layer(stage) + j;
    add_part(TensorPart::Layer, layer, global_block_name(c, stage, j) + ".");
  }
  if (stage == c.num_stages - 1) add_part(TensorPart::Head, -1, "");
  return out;
}

std::string global_block_name(const ModelConfig& c, int64_t stage, int64_t j) {
  if (!c.is_llama() && c.gpt2.shared_layers) return "shared_block" + std::to_string(stage);
  return "block" + std::to_string(c.first_layer(stage) + j);
}

const char* hf_architecture(Architecture a) { return a == Architecture::Llama ? "LlamaForCausalLM" : "GPT2LMHeadModel"; }
const char* hf_model_type(Architecture a) { return a == Architecture::Llama ? "llama" : "gpt2"; }

}  // namespace swarm::model
