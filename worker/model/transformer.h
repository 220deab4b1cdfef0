// Transformer building blocks of the staged LM: the input embedding (first stage), the pre-LN
// decoder block, and the output head (last stage). Parameters are plain registered tensors used
// with functional ops, so every forward is deterministic (no dropout) and a backward may
// recompute it.
//
// Initialization is keyed by a *global* parameter name (e.g. "block3.qkv_weight"): each tensor
// draws from its own CPU generator seeded by derive_seed(seed, global name), so the same block
// gets bit-identical weights whether it lives in a StageModel or in the unstaged TransformerLM,
// on any process and any device. Constructors create zero parameters; the owner (StageModel,
// TransformerLM) calls reset_parameters.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>

#include "worker/model/config.h"

namespace swarm::model {

// Mixes a run seed with a parameter name (FNV-1a of the name, then splitmix64).
uint64_t derive_seed(uint64_t seed, const std::string& name);

// Causal multi-head self-attention core. qkv: [B,T,3H] (fused projection output).
// Returns [B,T,H] (before the output projection). Position t attends to positions <= t.
// libtorch 2.x: fused scaled_dot_product_attention (causal); 1.13: explicit_causal_attention.
torch::Tensor causal_self_attention(const torch::Tensor& qkv, int64_t num_heads);

// The unfused form: softmax(q k^T / sqrt(d) + causal mask) v with the T x T tensors materialized.
// q, k, v: [B,nh,T,hd]; returns [B,T,nh*hd]. The reference the fused path is tested against.
torch::Tensor explicit_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v);

// Token embedding [V,H] + learned position embedding [S,H]. int64 ids [B,T] -> [B,T,H].
class EmbeddingLayer : public torch::nn::Module {
 public:
  explicit EmbeddingLayer(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& tokens);
  // Global names: "embed.tokens", "embed.positions".
  void reset_parameters(uint64_t seed);

  torch::Tensor tokens, positions;

 private:
  ModelConfig config_;
};

// Pre-LayerNorm decoder block: x + Attn(LN1(x)), then x + MLP(LN2(x)); MLP = fc2(GELU(fc1)).
class TransformerBlock : public torch::nn::Module {
 public:
  explicit TransformerBlock(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // [B,T,H] -> [B,T,H]
  // global_name identifies the block across the whole model ("block<g>" or "shared_block<s>").
  // Linear weights ~ N(0, 0.02); the two residual projections use 0.02/sqrt(2*total_layers)
  // (GPT-2); biases 0; LayerNorm gains 1.
  void reset_parameters(uint64_t seed, const std::string& global_name);

  torch::Tensor ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias;
  torch::Tensor ln2_weight, ln2_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias;

 private:
  ModelConfig config_;
};

// Final LayerNorm + LM head (no bias). [B,T,H] -> logits [B,T,V].
class OutputHead : public torch::nn::Module {
 public:
  explicit OutputHead(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  // Global names: "head.ln_weight", "head.ln_bias", "head.weight".
  void reset_parameters(uint64_t seed);

  torch::Tensor ln_weight, ln_bias, weight;

 private:
  ModelConfig config_;
};

// Global block name used for initialization: "block<g>" with g = first_layer(stage) + j, or
// "shared_block<stage>" when gpt2.shared_layers (j is then ignored).
std::string global_block_name(const ModelConfig& config, int64_t stage, int64_t j);

// Mean cross-entropy of logits [B,T,V] (or [N,V]) against int64 targets [B,T] (or [N]).
// Throws std::invalid_argument on shape mismatch or targets outside [0, V).
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace swarm::model
