// StageModel: the slice of the transformer LM that one worker serves.
//   stage 0          : int64 token ids [B,T] -> hidden [B,T,H]   (embedding + blocks)
//   middle stages    : hidden [B,T,H] -> hidden [B,T,H]          (blocks)
//   last stage       : hidden [B,T,H] -> logits [B,T,V]          (blocks + LN + LM head)
//   single stage     : ids -> logits
// Parameter names, in order: arch_table.h's stage_tensors(config, stage) — the embedding's
// ("embed.tokens", gpt2's "embed.positions"), every layer's "block<g>.<p>" with g the layer's
// *global* index (gpt2 with shared_layers: "shared_block<stage>.<p>"), the head's.
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

class StageModel : public torch::nn::Module {
 public:
  // Throws std::invalid_argument for an invalid config or stage_index outside [0, num_stages).
  // Parameters are created on the CPU (float32) and initialized from `seed` (see make_stage).
  StageModel(const ModelConfig& config, int64_t stage_index, uint64_t seed = 0);

  // Validates the input (rank, dtype, hidden size, T <= sequence_length, token ids in range) and
  // throws std::invalid_argument with a clear message on mismatch. A floating input is cast to
  // the parameters' dtype and device.
  torch::Tensor forward(const torch::Tensor& input);

  // Mean cross-entropy; only meaningful on the last stage (throws std::logic_error otherwise).
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets);

  // Re-initializes every parameter deterministically from (config, stage, seed).
  void reset_parameters(uint64_t seed);

  bool is_first() const { return stage_index_ == 0; }
  bool is_last() const { return stage_index_ == config_.num_stages - 1; }
  int64_t stage_index() const { return stage_index_; }
  const ModelConfig& config() const { return config_; }

  // Submodules (null where the stage has none). blocks() has layers_in(stage) entries, or one
  // entry when gpt2.shared_layers (applied layers_in(stage) times): TransformerBlock (gpt2) or
  // LlamaBlock (llama).
  const std::shared_ptr<EmbeddingLayer>& embedding() const { return embed_; }
  const std::vector<std::shared_ptr<DecoderLayer>>& blocks() const { return blocks_; }
  const std::shared_ptr<OutputHead>& head() const { return head_; }

 private:
  ModelConfig config_;
  int64_t stage_index_;
  std::shared_ptr<EmbeddingLayer> embed_;
  std::vector<std::shared_ptr<DecoderLayer>> blocks_;
  std::shared_ptr<OutputHead> head_;
  RotaryCache rope_;
};

// Bit-identical parameters for the same (config, stage, seed) on every process; equal to the
// corresponding slice of make_reference_model(config, seed).
std::shared_ptr<StageModel> make_stage(const ModelConfig& config, int64_t stage, uint64_t seed);

}  // namespace swarm::model
