// The llama architecture (Hugging Face's LlamaForCausalLM, the maths of modeling_llama.py):
//   layer   x + o(attention(rope(q(n1)), rope(k(n1)), v(n1))), n1 = RMSNorm(x; attn_norm), then
//           y + down(silu(gate(n2)) * up(n2)), n2 = RMSNorm(y; mlp_norm)
//   rope    Hugging Face's rotate-half layout: for a head of d values, value i < d/2 pairs with
//           i + d/2; angle = position * inv_freq[i mod d/2], inv_freq[i] = rope_theta^(-2i/d)
//           (computed in float32 as transformers does), optionally Llama 3 scaled
//   GQA     num_heads query heads of head_dim; num_kv_heads k/v heads, query head h reads
//           k/v head h / (num_heads / num_kv_heads)
// q, k, v are separate parameters (as Hugging Face stores them) but one matmul: their weights
// are concatenated for the forward, as are gate and up.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "worker/model/config.h"
#include "worker/model/layer.h"

namespace swarm::model {

// RMSNorm as transformers computes it: in float32, x * rsqrt(mean(x^2) + eps), cast back to x's
// dtype, times weight. float32 on the CPU: fused_cpu.h.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The rotary inverse frequencies [head_dim / 2] (float32), Llama 3 scaling applied when enabled.
at::Tensor rotary_inv_freq(const LlamaParams& params);

// cos and sin [T, head_dim] of positions 0..T-1 (float32, on `device`).
RotaryTables rotary_tables(const LlamaParams& params, int64_t T, c10::Device device);

// A model's rotary tables: computed once per device for its sequence_length positions and
// narrowed to each forward's T. Empty tables for gpt2. Not thread-safe (a model computes on one
// thread).
class RotaryCache {
 public:
  explicit RotaryCache(const ModelConfig& config) : config_(config) {}
  RotaryTables get(int64_t T, c10::Device device);

 private:
  ModelConfig config_;
  RotaryTables full_;
};

// x [B, T, heads, d] rotated: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1], each
// position t by its row of the tables (cast to x's dtype). float32 on the CPU: fused_cpu.h.
at::Tensor apply_rotary(const at::Tensor& x, const RotaryTables& rope);

// One llama decoder layer. Parameters, in this order (biases only when configured):
//   attn_norm [H], q_weight [nh*hd, H], q_bias, k_weight [nkv*hd, H], k_bias, v_weight [nkv*hd, H],
//   v_bias, o_weight [H, nh*hd], o_bias [H], mlp_norm [H], gate_weight [I, H], gate_bias,
//   up_weight [I, H], up_bias, down_weight [H, I], down_bias [H]
class LlamaBlock : public DecoderLayer {
 public:
  explicit LlamaBlock(const ModelConfig& config);
  at::Tensor forward(const at::Tensor& x, const RotaryTables& rope) override;
  // Weights ~ N(0, 0.02) (transformers' initializer_range), biases 0, norm gains 1.
  void reset_parameters(uint64_t seed, const std::string& global_name) override;
  const at::Tensor& reference_parameter() const override { return attn_norm; }

  at::Tensor attn_norm, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, o_bias;
  at::Tensor mlp_norm, gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias;

 private:
  ModelConfig config_;
};

}  // namespace swarm::model
