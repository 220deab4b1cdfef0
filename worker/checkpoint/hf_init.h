// spec.model.init in a job's processes: a stage that never stepped and has neither a live peer to
// download from nor a checkpoint of the job starts from the Hugging Face checkpoint's tensors
// instead of the seed (worker/stage/membership.cc), as do the single-process baseline and
// `swarm export --initial`. Before any of them trains, the checkpoint is checked against the spec.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "worker/checkpoint/export.h"
#include "worker/checkpoint/hf_checkpoint.h"
#include "worker/checkpoint/hf_import.h"
#include "worker/model/config.h"
#include "worker/model/stage.h"

namespace swarm::runtime {

// Stage `stage`'s parameters with their Hugging Face names and shapes (the architecture's name
// table, worker/model/).
std::vector<HfTensorRef> hf_stage_refs(const model::ModelConfig& config, int64_t stage);

// Everything that keeps spec.model.init from giving the job its initial parameters: config.json
// against spec.model (hf_model_mismatches: each field with both values), then every stage's
// tensors (missing, shape, dtype). Reads config.json, the index and the shards' headers only.
// Throws std::runtime_error listing them all, one per line, after a line naming spec.model.init.from.
// Nothing without spec.model.init.
void check_model_init(const JobSpec& spec);

// Overwrites `stage`'s parameters with the checkpoint's (its stage's tensors only, one at a time).
// Throws std::runtime_error naming the tensor; nothing without spec.model.init.
void load_model_init(const JobSpec& spec, model::StageModel& stage);

// A Hugging Face checkpoint folder (or s3:// prefix) as one model for `swarm eval` and `swarm
// generate` (the "before" of a fine-tuning run): one stage holding every layer, windows of
// `sequence_length` tokens (0: min(256, max_position_embeddings)), its tokenizer.model when it
// has one, else its tokenizer.json (a local folder's; token files from scripts/hf_tokenize.py),
// else bytes. Holds the whole model.
ExportedModel load_hf_model(const std::string& dir, int64_t sequence_length, const CheckpointS3Spec& s3 = {});

}  // namespace swarm::runtime
