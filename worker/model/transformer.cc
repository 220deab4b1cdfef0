#include "worker/model/transformer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace swarm::model {
namespace {

constexpr double kInitStd = 0.02;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Fills p (any device/dtype) from a CPU float generator keyed by (seed, name): the values do not
// depend on where the parameter lives.
void init_normal(torch::Tensor& p, uint64_t seed, const std::string& name, double std) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(derive_seed(seed, name));
  auto tmp = torch::empty(p.sizes(), torch::TensorOptions().dtype(torch::kFloat));
  tmp.normal_(0.0, std, gen);
  p.copy_(tmp);
}

void init_const(torch::Tensor& p, double value) {
  torch::NoGradGuard no_grad;
  p.fill_(value);
}

}  // namespace

uint64_t derive_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return splitmix64(splitmix64(seed) ^ h);
}

torch::Tensor causal_self_attention(const torch::Tensor& qkv, int64_t num_heads) {
  const int64_t B = qkv.size(0), T = qkv.size(1), H = qkv.size(2) / 3;
  const int64_t hd = H / num_heads;
  // [B,T,3H] -> three [B,nh,T,hd] views (no copies). unbind, not parts[i]: its backward is one
  // stack into the qkv gradient, where three selects would each zero a qkv-sized gradient, copy
  // their part in and add the three up.
  auto parts = qkv.view({B, T, 3, num_heads, hd}).unbind(2);
  auto q = parts[0].transpose(1, 2), k = parts[1].transpose(1, 2), v = parts[2].transpose(1, 2);
#if TORCH_VERSION_MAJOR >= 2
  // libtorch 2.x: the fused kernel on every device (flash attention on the CPU too: blockwise
  // online softmax, no T x T score, mask or probability tensors, and the masked half skipped).
  // Same function as the explicit form below up to float rounding.
  if (qkv.is_cpu() && qkv.scalar_type() != torch::kFloat) {
    // bf16/fp16 autocast on the CPU: the flash kernel's reduced-precision backward is slow there
    // (measured with libtorch 2.11: 25 ms of a 48 ms bf16 stage step, 3x its float32 time), so the
    // attention core runs in float32, outside autocast, and returns in the input's dtype.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
    auto y = at::scaled_dot_product_attention(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat),
                                              {}, 0.0, /*is_causal=*/true);
    return y.to(qkv.scalar_type()).transpose(1, 2).reshape({B, T, H});
  }
  auto y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  return y.transpose(1, 2).reshape({B, T, H});
#else
  // libtorch 1.13 (Debian's, -DSWARM_TORCH_CMAKE_PREFIX= builds) has no fused attention.
  return explicit_causal_attention(q, k, v);
#endif
}

torch::Tensor explicit_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v) {
  const int64_t B = q.size(0), nh = q.size(1), T = q.size(2), hd = q.size(3);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  auto future = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(q.device()))
                    .triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  auto att = torch::softmax(scores, -1);
  auto y = torch::matmul(att, v);  // [B,nh,T,hd]
  return y.transpose(1, 2).reshape({B, T, nh * hd});
}

// ---- EmbeddingLayer ----

EmbeddingLayer::EmbeddingLayer(const ModelConfig& config) : config_(config) {
  tokens = register_parameter("tokens", torch::zeros({config.vocab_size, config.hidden_size}));
  positions =
      register_parameter("positions", torch::zeros({config.sequence_length, config.hidden_size}));
}

void EmbeddingLayer::reset_parameters(uint64_t seed) {
  init_normal(tokens, seed, "embed.tokens", kInitStd);
  init_normal(positions, seed, "embed.positions", kInitStd);
}

torch::Tensor EmbeddingLayer::forward(const torch::Tensor& ids) {
  const int64_t T = ids.size(1);
  auto tok = torch::embedding(tokens, ids);  // [B,T,H]
  return tok + positions.narrow(0, 0, T).unsqueeze(0);
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
  ln_weight = register_parameter("ln_weight", torch::zeros({config.hidden_size}));
  ln_bias = register_parameter("ln_bias", torch::zeros({config.hidden_size}));
  weight = register_parameter("weight", torch::zeros({config.vocab_size, config.hidden_size}));
}

void OutputHead::reset_parameters(uint64_t seed) {
  init_const(ln_weight, 1.0);
  init_const(ln_bias, 0.0);
  init_normal(weight, seed, "head.weight", kInitStd);
}

torch::Tensor OutputHead::forward(const torch::Tensor& x) {
  auto h = torch::layer_norm(x, {config_.hidden_size}, ln_weight, ln_bias, config_.gpt2.layer_norm_eps);
  return torch::linear(h, weight);
}

// ---- helpers ----

std::string global_block_name(const ModelConfig& config, int64_t stage, int64_t j) {
  if (config.gpt2.shared_layers) return "shared_block" + std::to_string(stage);
  return "block" + std::to_string(config.first_layer(stage) + j);
}

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
