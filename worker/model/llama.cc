#include "worker/model/llama.h"

#include <torch/torch.h>

#include <cmath>
#include <utility>
#include <vector>

#include "worker/model/attention.h"
#include "worker/model/fused_cpu.h"
#include "worker/model/init.h"

namespace swarm::model {
namespace {

// The concatenation of the defined tensors along dim 0 (undefined when none is).
at::Tensor cat_defined(std::initializer_list<at::Tensor> parts) {
  std::vector<at::Tensor> defined;
  for (const auto& p : parts) {
    if (p.defined()) defined.push_back(p);
  }
  if (defined.empty()) return {};
  return defined.size() == 1 ? defined.front() : torch::cat(defined, 0);
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (fused_applies({x, weight})) return rms_norm_fused(x, weight, eps);
  const auto xf = x.to(torch::kFloat);
  const auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor rotary_inv_freq(const LlamaParams& p) {
  // float32 throughout, as transformers' _compute_default_rope_parameters and
  // _compute_llama3_parameters compute it (so exported models agree to float rounding).
  const int64_t d = p.head_dim;
  const auto exponents = torch::arange(0, d, 2, torch::kLong).to(torch::kFloat) / static_cast<double>(d);
  auto inv_freq = torch::reciprocal(torch::pow(p.rope_theta, exponents));
  const RopeScaling& s = p.rope_scaling;
  if (!s.enabled()) return inv_freq;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  const auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const auto smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}

RotaryTables rotary_tables(const LlamaParams& p, int64_t T, c10::Device device) {
  torch::NoGradGuard no_grad;
  const auto positions = torch::arange(T, torch::kLong).to(torch::kFloat);
  const auto freqs = torch::outer(positions, rotary_inv_freq(p));  // [T, d/2]
  const auto angles = torch::cat({freqs, freqs}, -1);              // [T, d]
  return {angles.cos().to(device), angles.sin().to(device)};
}

RotaryTables RotaryCache::get(int64_t T, c10::Device device) {
  if (!config_.is_llama()) return {};
  if (!full_.cos.defined() || full_.cos.device() != device) {
    full_ = rotary_tables(config_.llama, config_.sequence_length, device);
  }
  return {full_.cos.narrow(0, 0, T), full_.sin.narrow(0, 0, T)};
}

at::Tensor apply_rotary(const at::Tensor& x, const RotaryTables& rope) {
  if (fused_applies({x, rope.cos, rope.sin})) return rotary_fused(x, rope.cos, rope.sin);
  const auto halves = x.chunk(2, -1);
  const auto rotated = torch::cat({-halves[1], halves[0]}, -1);
  const auto dtype = x.scalar_type();
  return x * rope.cos.unsqueeze(1).to(dtype) + rotated * rope.sin.unsqueeze(1).to(dtype);
}

LlamaBlock::LlamaBlock(const ModelConfig& config) : config_(config) {
  const int64_t H = config.hidden_size, I = config.llama.intermediate_size;
  const int64_t Q = config.num_heads * config.llama.head_dim, KV = config.llama.num_kv_heads * config.llama.head_dim;
  const bool ab = config.llama.attention_bias, mb = config.llama.mlp_bias;
  attn_norm = register_parameter("attn_norm", torch::zeros({H}));
  q_weight = register_parameter("q_weight", torch::zeros({Q, H}));
  if (ab) q_bias = register_parameter("q_bias", torch::zeros({Q}));
  k_weight = register_parameter("k_weight", torch::zeros({KV, H}));
  if (ab) k_bias = register_parameter("k_bias", torch::zeros({KV}));
  v_weight = register_parameter("v_weight", torch::zeros({KV, H}));
  if (ab) v_bias = register_parameter("v_bias", torch::zeros({KV}));
  o_weight = register_parameter("o_weight", torch::zeros({H, Q}));
  if (ab) o_bias = register_parameter("o_bias", torch::zeros({H}));
  mlp_norm = register_parameter("mlp_norm", torch::zeros({H}));
  gate_weight = register_parameter("gate_weight", torch::zeros({I, H}));
  if (mb) gate_bias = register_parameter("gate_bias", torch::zeros({I}));
  up_weight = register_parameter("up_weight", torch::zeros({I, H}));
  if (mb) up_bias = register_parameter("up_bias", torch::zeros({I}));
  down_weight = register_parameter("down_weight", torch::zeros({H, I}));
  if (mb) down_bias = register_parameter("down_bias", torch::zeros({H}));
}

void LlamaBlock::reset_parameters(uint64_t seed, const std::string& g) {
  init_const(attn_norm, 1.0);
  init_const(mlp_norm, 1.0);
  const std::pair<at::Tensor*, const char*> weights[] = {
      {&q_weight, "q_weight"},       {&k_weight, "k_weight"},   {&v_weight, "v_weight"},
      {&o_weight, "o_weight"},       {&gate_weight, "gate_weight"}, {&up_weight, "up_weight"},
      {&down_weight, "down_weight"}};
  for (const auto& [w, name] : weights) init_normal(*w, seed, g + "." + name, kInitStd);
  for (auto* b : {&q_bias, &k_bias, &v_bias, &o_bias, &gate_bias, &up_bias, &down_bias}) {
    if (b->defined()) init_const(*b, 0.0);
  }
}

at::Tensor LlamaBlock::forward(const at::Tensor& x, const RotaryTables& rope) {
  const int64_t B = x.size(0), T = x.size(1);
  const int64_t nh = config_.num_heads, nkv = config_.llama.num_kv_heads, hd = config_.llama.head_dim;
  const double eps = config_.llama.rms_norm_eps;
  auto h = rms_norm(x, attn_norm, eps);
  auto qkv = torch::linear(h, cat_defined({q_weight, k_weight, v_weight}), cat_defined({q_bias, k_bias, v_bias}));
  auto parts = qkv.split({nh * hd, nkv * hd, nkv * hd}, -1);
  auto q = apply_rotary(parts[0].view({B, T, nh, hd}), rope).transpose(1, 2);
  auto k = apply_rotary(parts[1].view({B, T, nkv, hd}), rope).transpose(1, 2);
  auto v = parts[2].view({B, T, nkv, hd}).transpose(1, 2);
  auto y = x + torch::linear(causal_attention(q, k, v), o_weight, o_bias);
  h = rms_norm(y, mlp_norm, eps);
  const auto gate_up = torch::linear(h, cat_defined({gate_weight, up_weight}), cat_defined({gate_bias, up_bias}));
  at::Tensor act;
  if (fused_applies({gate_up})) {
    act = swiglu_fused(gate_up);
  } else {
    const auto parts_mlp = gate_up.chunk(2, -1);
    act = torch::silu(parts_mlp[0]) * parts_mlp[1];
  }
  return y + torch::linear(act, down_weight, down_bias);
}

}  // namespace swarm::model
