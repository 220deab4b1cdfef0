// TransformerLM: the unstaged reference model — every block of every stage in one module. Used to
// check that the staged pipeline computes exactly the same function, and as a single-process
// baseline. Same initialization as make_stage: stage s of make_reference_model(config, seed)
// equals make_stage(config, s, seed) bit for bit.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "worker/model/config.h"
#include "worker/model/layer.h"
#include "worker/model/llama.h"
#include "worker/model/transformer.h"

namespace swarm::model {

class StageModel;

class TransformerLM : public torch::nn::Module {
 public:
  explicit TransformerLM(const ModelConfig& config, uint64_t seed = 0);

  torch::Tensor forward(const torch::Tensor& tokens);  // int64 [B,T] -> logits [B,T,V]
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets);
  void reset_parameters(uint64_t seed);

  // Copies this model's parameters into `stages` (stage i at index i, all num_stages of them).
  // Throws std::invalid_argument if the count, a config or a stage index does not match.
  void load_into_stages(const std::vector<std::shared_ptr<StageModel>>& stages) const;
  // Fresh StageModels (CPU) holding copies of this model's parameters.
  std::vector<std::shared_ptr<StageModel>> make_stages() const;

  const ModelConfig& config() const { return config_; }
  // Block applied at stage s, layer j (the stage's shared block when shared_layers).
  const std::shared_ptr<DecoderLayer>& block_at(int64_t stage, int64_t j) const;
  const std::shared_ptr<EmbeddingLayer>& embedding() const { return embed_; }
  const std::shared_ptr<OutputHead>& head() const { return head_; }

 private:
  ModelConfig config_;
  std::shared_ptr<EmbeddingLayer> embed_;
  // total_layers() blocks ("block<g>"), or num_stages ("shared_block<s>").
  std::vector<std::shared_ptr<DecoderLayer>> blocks_;
  std::shared_ptr<OutputHead> head_;
  RotaryCache rope_;
};

std::shared_ptr<TransformerLM> make_reference_model(const ModelConfig& config, uint64_t seed);

}  // namespace swarm::model
