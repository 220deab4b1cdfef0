// A stage's parameters from a Hugging Face checkpoint (spec.model.init, format huggingface): each
// parameter is read by its Hugging Face name from the shard that holds it (hf_checkpoint.h: offset
// reads), converted to float32 and copied into the stage, one tensor at a time. A worker's memory
// is its stage plus the one tensor in flight, never the model.
//
// Tied embeddings: a checkpoint saved with tie_word_embeddings has no lm_head.weight; the last
// stage's head then reads model.embed_tokens.weight. The swarm keeps them untied (the embedding
// lives on the first stage, the head on the last), so from the first step on they train apart.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/checkpoint/hf_checkpoint.h"

namespace swarm::runtime {

// One parameter of a stage: its name in the stage module, its Hugging Face name, its shape.
struct HfTensorRef {
  std::string internal;
  std::string hf;
  std::vector<int64_t> shape;
};

// The checkpoint's name that holds `hf_name`'s values: itself, or for lm_head.weight of a tied
// checkpoint without one, model.embed_tokens.weight.
std::string hf_source_name(const HfCheckpoint& ckpt, const std::string& hf_name);

// What keeps `refs` from loading: a tensor missing, of another shape, or of a dtype that is not
// read; each problem names the tensor, its file and both values. Reads headers only.
std::vector<std::string> hf_tensor_problems(const HfCheckpoint& ckpt, const std::vector<HfTensorRef>& refs);

// Copies every ref's tensor into `stage`'s parameter of its internal name (on the parameter's
// device and dtype). Throws std::runtime_error naming the tensor: a parameter the module lacks,
// or one of hf_tensor_problems. Parameters not in `refs` are left as they are.
void load_hf_tensors(const HfCheckpoint& ckpt, const std::vector<HfTensorRef>& refs, torch::nn::Module& stage);

}  // namespace swarm::runtime
