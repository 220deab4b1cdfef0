// DecoderLayer: one layer of the decoder stack, whatever the architecture (transformer.h: gpt2's
// TransformerBlock, llama.h: LlamaBlock). Parameters are plain registered tensors used with
// functional ops, so every forward is deterministic (no dropout) and a backward may recompute it.
// Constructors create zero parameters; the owner (StageModel, TransformerLM) calls
// reset_parameters with the layer's global name ("block<g>", or gpt2's "shared_block<s>").
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace swarm::model {

// Rotary position tables for the positions 0..T-1 of a forward: cos and sin [T, head_dim] in
// float32 on the layers' device (llama.h: rotary_tables). Undefined for gpt2, which learns its
// positions in the embedding.
struct RotaryTables {
  at::Tensor cos, sin;
};

class DecoderLayer : public torch::nn::Module {
 public:
  // [B,T,H] -> [B,T,H].
  virtual at::Tensor forward(const at::Tensor& x, const RotaryTables& rope) = 0;
  virtual void reset_parameters(uint64_t seed, const std::string& global_name) = 0;
  // A parameter whose dtype and device are the layer's.
  virtual const at::Tensor& reference_parameter() const = 0;
};

}  // namespace swarm::model
