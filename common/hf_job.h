// A Hugging Face checkpoint's config.json (common/hf_config.h) against the job spec: the SwarmJob
// that continues training it (`swarm job from-hf`), and what a given spec's model section says
// otherwise than the checkpoint (checked before any training). Pure: no files are read here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/hf_config.h"
#include "common/job_spec.h"

namespace swarm {

struct FromHfOptions {
  std::string dir;                       // spec.model.init.from, as given
  std::string name = "hf-llama";         // metadata.name
  std::vector<int64_t> layers_per_stage;  // spec.pipeline.layersPerStage (planner::balanced_layers)
  int64_t sequence_length = 0;           // 0: min(256, max_position_embeddings)
  std::string tokenizer_model;           // a SentencePiece tokenizer.model ("" if the folder has none)
  std::string tokenizer_json;            // the folder's tokenizer.json, when it has no tokenizer.model
  std::string dataset;                   // spec.training.dataset.path ("" keeps the default)
  double learning_rate = 1e-4;           // fine-tuning, not pre-training
};

// spec.model.sequenceLength of the job: `requested`, or when 0 min(256, max_position_embeddings).
int64_t hf_sequence_length(const HfModelConfig& hf, int64_t requested);

// The job: spec.model from config.json (architecture llama; tie_word_embeddings imports untied),
// spec.model.init {from: dir, format: huggingface}, spec.pipeline {stages, layersPerStage}, the
// tokenizer (the SentencePiece model, else the tokenizer.json, whose data is pre-tokenised by
// scripts/hf_tokenize.py, else bytes), the dataset and the learning rate. The caller
// validates it (validate_job_spec) and so sees what does not fit the project's ranges.
JobSpec job_from_hf(const HfModelConfig& hf, const FromHfOptions& options);

// The job as a SwarmJob manifest: every field job_from_hf sets, with comments saying where each
// came from; the rest left to the defaults. parse_job_spec of the text gives the job back.
std::string hf_job_yaml(const JobSpec& job, const HfModelConfig& hf, const FromHfOptions& options);

// Each way the spec's model differs from the checkpoint's config.json, one message each naming
// both fields and both values ("spec.model.numHeads is 8, <config_path> has num_attention_heads
// 4"): architecture, layers (the sum of the stages' layers), vocabulary, hidden size, heads, KV
// heads, head_dim, intermediate size, the norm's epsilon, rope theta and scaling, biases. Empty
// when they agree.
std::vector<std::string> hf_model_mismatches(const JobSpec& spec, const HfModelConfig& hf, const std::string& config_path);

}  // namespace swarm
