#include "worker/model/stage.h"

#include "worker/model/arch_table.h"

#include <torch/torch.h>

#include <sstream>
#include <stdexcept>

namespace swarm::model {
namespace {

std::string shape_str(const torch::Tensor& t) {
  std::ostringstream os;
  os << t.sizes() << " " << t.dtype();
  return os.str();
}

}  // namespace

StageModel::StageModel(const ModelConfig& config, int64_t stage_index, uint64_t seed)
    : config_(config), stage_index_(stage_index), rope_(config) {
  validate(config);
  if (stage_index < 0 || stage_index >= config.num_stages) {
    throw std::invalid_argument("StageModel: stage " + std::to_string(stage_index) +
                                " outside [0, " + std::to_string(config.num_stages) + ")");
  }
  if (is_first()) embed_ = register_module("embed", std::make_shared<EmbeddingLayer>(config));
  const int64_t n_blocks = config.gpt2.shared_layers ? 1 : config.layers_in(stage_index);
  for (int64_t j = 0; j < n_blocks; ++j) {
    blocks_.push_back(register_module(global_block_name(config, stage_index, j), make_layer(config)));
  }
  if (is_last()) head_ = register_module("head", std::make_shared<OutputHead>(config));
  reset_parameters(seed);
}

void StageModel::reset_parameters(uint64_t seed) {
  if (embed_) embed_->reset_parameters(seed);
  for (size_t j = 0; j < blocks_.size(); ++j) {
    blocks_[j]->reset_parameters(seed,
                                 global_block_name(config_, stage_index_, static_cast<int64_t>(j)));
  }
  if (head_) head_->reset_parameters(seed);
}

torch::Tensor StageModel::forward(const torch::Tensor& input) {
  if (!input.defined()) throw std::invalid_argument("StageModel::forward: undefined input");
  torch::Tensor x;
  const auto& ref = blocks_.front()->reference_parameter();  // dtype/device of the parameters
  if (is_first()) {
    if (input.dim() != 2 || input.scalar_type() != torch::kLong) {
      throw std::invalid_argument("stage 0 expects int64 token ids [B,T], got " +
                                  shape_str(input));
    }
    if (input.size(1) > config_.sequence_length || input.size(1) == 0) {
      throw std::invalid_argument("stage 0: sequence length " + std::to_string(input.size(1)) +
                                  " outside [1, " + std::to_string(config_.sequence_length) + "]");
    }
    auto ids = input.to(ref.device());
    if (ids.numel() > 0) {
      auto range = torch::stack({ids.min(), ids.max()}).cpu();
      const int64_t lo = range[0].item<int64_t>(), hi = range[1].item<int64_t>();
      if (lo < 0 || hi >= config_.vocab_size) {
        throw std::invalid_argument("stage 0: token ids must lie in [0, " +
                                    std::to_string(config_.vocab_size) + "), got [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
    }
    x = embed_->forward(ids);
  } else {
    if (input.dim() != 3 || !input.is_floating_point() ||
        input.size(2) != config_.hidden_size) {
      throw std::invalid_argument("stage " + std::to_string(stage_index_) +
                                  " expects floating hidden states [B,T," +
                                  std::to_string(config_.hidden_size) + "], got " +
                                  shape_str(input));
    }
    if (input.size(1) > config_.sequence_length || input.size(1) == 0) {
      throw std::invalid_argument("stage " + std::to_string(stage_index_) + ": sequence length " +
                                  std::to_string(input.size(1)) + " outside [1, " +
                                  std::to_string(config_.sequence_length) + "]");
    }
    x = input.to(ref.device(), ref.scalar_type());
  }
  const RotaryTables rope = rope_.get(x.size(1), ref.device());
  for (int64_t j = 0; j < config_.layers_in(stage_index_); ++j) {
    x = blocks_[config_.gpt2.shared_layers ? 0 : j]->forward(x, rope);
  }
  if (head_) x = head_->forward(x);
  return x;
}

torch::Tensor StageModel::loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  if (!is_last()) {
    throw std::logic_error("StageModel::loss called on stage " + std::to_string(stage_index_) +
                           ", which is not the last stage");
  }
  return lm_loss(logits, targets);
}

std::shared_ptr<StageModel> make_stage(const ModelConfig& config, int64_t stage, uint64_t seed) {
  return std::make_shared<StageModel>(config, stage, seed);
}

}  // namespace swarm::model
