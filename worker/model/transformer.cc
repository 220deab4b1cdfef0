#include "worker/model/transformer.h"

#include <torch/torch.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "worker/model/llama.h"

namespace swarm::model {

// ---- EmbeddingLayer ----

EmbeddingLayer::EmbeddingLayer(const ModelConfig& config) : config_(config) {
  tokens = register_parameter("tokens", torch::zeros({config.vocab_size, config.hidden_size}));
  if (!config.is_llama()) {
    positions = register_parameter("positions", torch::zeros({config.sequence_length, config.hidden_size}));
  }
}

void EmbeddingLayer::reset_parameters(uint64_t seed) {
  init_normal(tokens, seed, "embed.tokens", kInitStd);
  if (positions.defined()) init_normal(positions, seed, "embed.positions", kInitStd);
}

torch::Tensor EmbeddingLayer::forward(const torch::Tensor& ids) {
  auto tok = torch::embedding(tokens, ids);  // [B,T,H]
  if (!positions.defined()) return tok;       // llama: rotary positions, in every layer
  return tok + positions.narrow(0, 0, ids.size(1)).unsqueeze(0);
}

// ---- TransformerBlock ----

TransformerBlock::TransformerBlock(const ModelConfig& config) : config_(config) {
  const int64_t H = config.hidden_size, M = config.gpt2.intermediate_size;
  ln1_weight = register_parameter("ln1_weight", torch::zeros({H}));
  ln1_bias = register_parameter("ln1_bias", torch::zeros({H}));
  qkv_weight = register_parameter("qkv_weight", torch::zeros({3 * H, H}));
  qkv_bias = register_parameter("qkv_bias", torch::zeros({3 * H}));
  proj_weight = register_parameter("proj_weight", torch::zeros({H, H}));
  proj_bias = register_parameter("proj_bias", torch::zeros({H}));
  ln2_weight = register_parameter("ln2_weight", torch::zeros({H}));
  ln2_bias = register_parameter("ln2_bias", torch::zeros({H}));
  fc1_weight = register_parameter("fc1_weight", torch::zeros({M, H}));
  fc1_bias = register_parameter("fc1_bias", torch::zeros({M}));
  fc2_weight = register_parameter("fc2_weight", torch::zeros({H, M}));
  fc2_bias = register_parameter("fc2_bias", torch::zeros({H}));
}

void TransformerBlock::reset_parameters(uint64_t seed, const std::string& g) {
  const double residual_std =
      kInitStd / std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(1, config_.total_layers())));
  init_const(ln1_weight, 1.0);
  init_const(ln1_bias, 0.0);
  init_normal(qkv_weight, seed, g + ".qkv_weight", kInitStd);
  init_const(qkv_bias, 0.0);
  init_normal(proj_weight, seed, g + ".proj_weight", residual_std);
  init_const(proj_bias, 0.0);
  init_const(ln2_weight, 1.0);
  init_const(ln2_bias, 0.0);
  init_normal(fc1_weight, seed, g + ".fc1_weight", kInitStd);
  init_const(fc1_bias, 0.0);
  init_normal(fc2_weight, seed, g + ".fc2_weight", residual_std);
  init_const(fc2_bias, 0.0);
}

torch::Tensor TransformerBlock::forward(const torch::Tensor& x) {
  const int64_t H = config_.hidden_size;
  const double eps = config_.gpt2.layer_norm_eps;
  auto h = torch::layer_norm(x, {H}, ln1_weight, ln1_bias, eps);
  auto qkv = torch::linear(h, qkv_weight, qkv_bias);
  auto attn = causal_self_attention(qkv, config_.num_heads);
  auto y = x + torch::linear(attn, proj_weight, proj_bias);
  h = torch::layer_norm(y, {H}, ln2_weight, ln2_bias, eps);
  h = torch::gelu(torch::linear(h, fc1_weight, fc1_bias));
  return y + torch::linear(h, fc2_weight, fc2_bias);
}

// ---- OutputHead ----

OutputHead::OutputHead(const ModelConfig& config) : config_(config) {
  if (config.is_llama()) {
    norm_weight = register_parameter("norm_weight", torch::zeros({config.hidden_size}));
  } else {
    ln_weight = register_parameter("ln_weight", torch::zeros({config.hidden_size}));
    ln_bias = register_parameter("ln_bias", torch::zeros({config.hidden_size}));
  }
  weight = register_parameter("weight", torch::zeros({config.vocab_size, config.hidden_size}));
}

void OutputHead::reset_parameters(uint64_t seed) {
  for (auto* gain : {&ln_weight, &norm_weight}) {
    if (gain->defined()) init_const(*gain, 1.0);
  }
  if (ln_bias.defined()) init_const(ln_bias, 0.0);
  init_normal(weight, seed, "head.weight", kInitStd);
}

torch::Tensor OutputHead::forward(const torch::Tensor& x) {
  const auto h = config_.is_llama()
                     ? rms_norm(x, norm_weight, config_.llama.rms_norm_eps)
                     : torch::layer_norm(x, {config_.hidden_size}, ln_weight, ln_bias, config_.gpt2.layer_norm_eps);
  return torch::linear(h, weight);
}

std::shared_ptr<DecoderLayer> make_layer(const ModelConfig& config) {
  if (config.is_llama()) return std::make_shared<LlamaBlock>(config);
  return std::make_shared<TransformerBlock>(config);
}

// ---- the loss ----

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  if (!logits.defined() || !targets.defined()) {
    throw std::invalid_argument("lm_loss: undefined logits or targets");
  }
  if (targets.scalar_type() != torch::kLong) {
    throw std::invalid_argument("lm_loss: targets must be int64");
  }
  const int64_t V = logits.size(-1);
  if (logits.numel() != targets.numel() * V) {
    std::ostringstream os;
    os << "lm_loss: logits " << logits.sizes() << " do not match targets " << targets.sizes();
    throw std::invalid_argument(os.str());
  }
  auto flat_targets = targets.reshape({-1}).to(logits.device());
  if (flat_targets.numel() > 0) {
    auto range = torch::stack({flat_targets.min(), flat_targets.max()}).cpu();
    const int64_t lo = range[0].item<int64_t>(), hi = range[1].item<int64_t>();
    if (lo < 0 || hi >= V) {
      throw std::invalid_argument("lm_loss: target ids must lie in [0, " + std::to_string(V) +
                                  "), got [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "]");
    }
  }
  // Reduced-precision logits (a bf16/fp16 compute scope) are scored in float32.
  const auto dtype = logits.scalar_type();
  const torch::Tensor scored =
      dtype == torch::kHalf || dtype == torch::kBFloat16 ? logits.to(torch::kFloat) : logits;
  return torch::nn::functional::cross_entropy(scored.reshape({-1, V}), flat_targets);
}

}  // namespace swarm::model
