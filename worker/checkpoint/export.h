// The trained model out of the swarm, and back in for evaluation and sampling.
//
// export_model gathers the newest step that every stage has an (authenticated) checkpoint of into
// one safetensors file (safetensors.h) and writes a config.json beside it ("model_type": gpt2 or
// llama, the shape, "stage_layers": the layers of each stage). Tensor names: the stages' own
// (worker/model/arch_table.h) with "block<g>." written "blocks.<g>." (g the layer's global index;
// with sharedLayers one block per stage, g = stage, applied to each of the stage's layers), float32.
// gpt2, with H = hiddenSize, M = the MLP width, V = vocabSize, T = sequenceLength:
//   embed.tokens [V, H], embed.positions [T, H]
//   blocks.<g>.{ln1_weight, ln1_bias [H], qkv_weight [3H, H], qkv_bias [3H], proj_weight [H, H],
//               proj_bias [H], ln2_weight, ln2_bias [H], fc1_weight [M, H], fc1_bias [M],
//               fc2_weight [H, M], fc2_bias [H]}
//   head.ln_weight, head.ln_bias [H], head.weight [V, H]
// The gpt2 forward pass: x = embed.tokens[ids] + embed.positions[:T]; per block, pre-LayerNorm
// (eps normEps, 1e-5 by default) causal self-attention (qkv split as [q | k | v], heads of
// H / numHeads, scores scaled by 1/sqrt(head size)) added to x, then LayerNorm, fc1, exact (erf)
// GELU, fc2 added to x; then head LayerNorm and logits = h head.weight^T. llama: worker/model/llama.h.
// The file's metadata holds the same config.json text ("swarm.config") and the step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/model/config.h"
#include "worker/model/stage.h"

namespace swarm::runtime {

struct ExportResult {
  int64_t step = 0;
  std::string model_path;
  std::string config_path;
  size_t tensors = 0;
  uint64_t bytes = 0;  // of the safetensors file
};

// Throws std::runtime_error naming the directory, stage or file: no checkpoints, no step every
// stage has, a checkpoint that fails authentication or does not fit the spec.
// `out_path` may be s3://bucket/key (config.json is uploaded beside it, after the model).
ExportResult export_model(const JobSpec& spec, const CheckpointLocation& checkpoints, const std::string& secret,
                          const std::string& out_path);

// The exported names of the stages' parameters, in stage order.
std::vector<std::pair<std::string, at::Tensor>> exported_tensors(
    const std::vector<std::shared_ptr<model::StageModel>>& stages);

// config.json of a spec's model (and its tokenizer), at `step`.
nlohmann::json model_config_json(const JobSpec& spec, int64_t step);

struct ExportedModel {
  model::ModelConfig config;
  nlohmann::json config_json;
  int64_t step = 0;
  std::vector<std::shared_ptr<model::StageModel>> stages;
  // Token ids [B, T'] (T' <= sequenceLength) -> logits [B, T', V], through every stage.
  at::Tensor logits(const at::Tensor& ids) const;
  // Mean cross-entropy of the next-token targets [B, T'].
  double loss(const at::Tensor& ids, const at::Tensor& targets) const;
};

// Where export_at_end writes: <checkpoints>/export/model.safetensors (a path or an s3:// URL).
std::string export_location(const CheckpointLocation& checkpoints);

// At the end of a finished run: exports the checkpoints (the job's spec.checkpoint, or where swarm
// local kept them) to export_location and returns it; nothing when there is no checkpoint location
// or the export fails (logged as a warning: the training itself succeeded).
std::optional<std::string> export_at_end(const JobSpec& spec, const CheckpointLocation& checkpoints,
                                         const std::string& secret);

// On a cluster, where trainer 0 exports once its steps are done (swarm trainer --export-at-end):
// waits up to `wait_seconds` until every stage has a checkpoint of step >= min_step (the stages
// checkpoint their last step), then exports the newest step they all have to export_location.
// Nothing when there is no location, no common step, or the export fails (logged).
std::optional<ExportResult> export_after_training(const JobSpec& spec, const CheckpointLocation& checkpoints,
                                                 const std::string& secret, int64_t min_step, double wait_seconds);

// Every stage of the job at the newest step they all checkpointed (*step), as export_model reads
// them. Throws as export_model does.
std::vector<std::shared_ptr<model::StageModel>> load_checkpointed_stages(const JobSpec& spec,
                                                                       const CheckpointLocation& checkpoints,
                                                                       const std::string& secret, int64_t* step);

// The job's initial stages: each from its seed, or from spec.model.init's checkpoint.
std::vector<std::shared_ptr<model::StageModel>> initial_stages(const JobSpec& spec);

// The job's initial parameters (every stage from its seed, step 0), written as export_model
// writes a trained model: the "before" of a run.
ExportResult export_initial(const JobSpec& spec, const std::string& out_path);

// Reads what export_model wrote (the config from the file's metadata). Throws std::runtime_error
// naming the file and the tensor that is missing or has another shape.
// An s3:// path is downloaded first (settings from `s3` over the environment).
ExportedModel load_exported(const std::string& path, const CheckpointS3Spec& s3 = {});

}  // namespace swarm::runtime
