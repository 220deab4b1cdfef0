// The pieces of the staged LM: the input embedding (first stage) and the output head (last stage)
// of every architecture, gpt2's decoder block (llama.h has llama's), and the loss.
//
// Initialization is keyed by a *global* parameter name (e.g. "block3.qkv_weight", init.h), so the
// same layer gets bit-identical weights whether it lives in a StageModel or in the unstaged
// TransformerLM, on any process and any device. Constructors create zero parameters; the owner
// (StageModel, TransformerLM) calls reset_parameters.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>

#include "worker/model/attention.h"
#include "worker/model/config.h"
#include "worker/model/init.h"
#include "worker/model/layer.h"

namespace swarm::model {

// Token embedding [V,H], plus gpt2's learned position embedding [S,H]. int64 ids [B,T] -> [B,T,H].
class EmbeddingLayer : public torch::nn::Module {
 public:
  explicit EmbeddingLayer(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& tokens);
  // Global names: "embed.tokens", "embed.positions" (gpt2).
  void reset_parameters(uint64_t seed);

  torch::Tensor tokens, positions;  // positions: gpt2 only

 private:
  ModelConfig config_;
};

// gpt2's pre-LayerNorm decoder block: x + Attn(LN1(x)), then x + MLP(LN2(x)); MLP = fc2(GELU(fc1)).
class TransformerBlock : public DecoderLayer {
 public:
  explicit TransformerBlock(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // [B,T,H] -> [B,T,H]
  torch::Tensor forward(const torch::Tensor& x, const RotaryTables&) override { return forward(x); }
  // global_name identifies the block across the whole model ("block<g>" or "shared_block<s>").
  // Linear weights ~ N(0, 0.02); the two residual projections use 0.02/sqrt(2*total_layers)
  // (GPT-2); biases 0; LayerNorm gains 1.
  void reset_parameters(uint64_t seed, const std::string& global_name) override;
  const torch::Tensor& reference_parameter() const override { return ln1_weight; }

  torch::Tensor ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias;
  torch::Tensor ln2_weight, ln2_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias;

 private:
  ModelConfig config_;
};

// Final norm + LM head (no bias). [B,T,H] -> logits [B,T,V]. gpt2: LayerNorm (ln_weight, ln_bias);
// llama: RMSNorm (norm_weight).
class OutputHead : public torch::nn::Module {
 public:
  explicit OutputHead(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  // Global names: "head.ln_weight", "head.ln_bias" / "head.norm_weight", and "head.weight".
  void reset_parameters(uint64_t seed);

  torch::Tensor ln_weight, ln_bias, norm_weight, weight;

 private:
  ModelConfig config_;
};

// A decoder layer of config's architecture (TransformerBlock or LlamaBlock), zero-initialized.
std::shared_ptr<DecoderLayer> make_layer(const ModelConfig& config);

// Mean cross-entropy of logits [B,T,V] (or [N,V]) against int64 targets [B,T] (or [N]).
// Throws std::invalid_argument on shape mismatch or targets outside [0, V).
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace swarm::model
