#include "worker/model/lm.h"

#include <torch/torch.h>

#include <stdexcept>

#include "worker/model/arch_table.h"
#include "worker/model/stage.h"

namespace swarm::model {
namespace {

void copy_module(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto src = from.named_parameters();
  auto dst = to.named_parameters();
  if (src.size() != dst.size()) throw std::logic_error("copy_module: parameter count mismatch");
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i].key() != dst[i].key() || !src[i].value().sizes().equals(dst[i].value().sizes())) {
      throw std::logic_error("copy_module: parameter mismatch at " + src[i].key());
    }
    dst[i].value().copy_(src[i].value());
  }
}

}  // namespace

TransformerLM::TransformerLM(const ModelConfig& config, uint64_t seed) : config_(config), rope_(config) {
  validate(config);
  embed_ = register_module("embed", std::make_shared<EmbeddingLayer>(config));
  for (int64_t s = 0; s < config.num_stages; ++s) {
    const int64_t per_stage = config.gpt2.shared_layers ? 1 : config.layers_in(s);
    for (int64_t j = 0; j < per_stage; ++j) {
      blocks_.push_back(register_module(global_block_name(config, s, j), make_layer(config)));
    }
  }
  head_ = register_module("head", std::make_shared<OutputHead>(config));
  reset_parameters(seed);
}

const std::shared_ptr<DecoderLayer>& TransformerLM::block_at(int64_t stage, int64_t j) const {
  if (config_.gpt2.shared_layers) return blocks_.at(static_cast<size_t>(stage));
  return blocks_.at(static_cast<size_t>(config_.first_layer(stage) + j));
}

void TransformerLM::reset_parameters(uint64_t seed) {
  embed_->reset_parameters(seed);
  for (int64_t s = 0; s < config_.num_stages; ++s) {
    const int64_t per_stage = config_.gpt2.shared_layers ? 1 : config_.layers_in(s);
    for (int64_t j = 0; j < per_stage; ++j) {
      block_at(s, j)->reset_parameters(seed, global_block_name(config_, s, j));
    }
  }
  head_->reset_parameters(seed);
}

torch::Tensor TransformerLM::forward(const torch::Tensor& tokens) {
  if (!tokens.defined() || tokens.dim() != 2 || tokens.scalar_type() != torch::kLong ||
      tokens.size(1) > config_.sequence_length) {
    throw std::invalid_argument("TransformerLM expects int64 token ids [B,T<=" +
                                std::to_string(config_.sequence_length) + "]");
  }
  auto x = embed_->forward(tokens.to(embed_->tokens.device()));
  const RotaryTables rope = rope_.get(x.size(1), x.device());
  for (int64_t s = 0; s < config_.num_stages; ++s) {
    for (int64_t j = 0; j < config_.layers_in(s); ++j) x = block_at(s, j)->forward(x, rope);
  }
  return head_->forward(x);
}

torch::Tensor TransformerLM::loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return lm_loss(logits, targets);
}

void TransformerLM::load_into_stages(
    const std::vector<std::shared_ptr<StageModel>>& stages) const {
  if (static_cast<int64_t>(stages.size()) != config_.num_stages) {
    throw std::invalid_argument("load_into_stages: expected " +
                                std::to_string(config_.num_stages) + " stages, got " +
                                std::to_string(stages.size()));
  }
  for (int64_t s = 0; s < config_.num_stages; ++s) {
    auto& stage = stages[static_cast<size_t>(s)];
    if (!stage || stage->config() != config_ || stage->stage_index() != s) {
      throw std::invalid_argument("load_into_stages: entry " + std::to_string(s) +
                                  " is not stage " + std::to_string(s) + " of this config");
    }
    if (stage->embedding()) copy_module(*embed_, *stage->embedding());
    const auto& blocks = stage->blocks();
    for (size_t j = 0; j < blocks.size(); ++j) {
      copy_module(*block_at(s, static_cast<int64_t>(j)), *blocks[j]);
    }
    if (stage->head()) copy_module(*head_, *stage->head());
  }
}

std::vector<std::shared_ptr<StageModel>> TransformerLM::make_stages() const {
  std::vector<std::shared_ptr<StageModel>> stages;
  for (int64_t s = 0; s < config_.num_stages; ++s) {
    stages.push_back(std::make_shared<StageModel>(config_, s));
  }
  load_into_stages(stages);
  return stages;
}

std::shared_ptr<TransformerLM> make_reference_model(const ModelConfig& config, uint64_t seed) {
  return std::make_shared<TransformerLM>(config, seed);
}

}  // namespace swarm::model
