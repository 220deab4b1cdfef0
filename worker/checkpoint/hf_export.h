// Hugging Face out: the stages of a job written as a checkpoint folder that transformers'
// AutoModelForCausalLM.from_pretrained loads (and vLLM and llama.cpp's converter read): a llama job
// as LlamaForCausalLM, a gpt2 job as GPT2LMHeadModel.
//   config.json             llama: LlamaForCausalLM, the legacy rope keys (rope_theta, rope_scaling
//                           with rope_type "llama3" when scaled: read by transformers 4.x and 5);
//                           gpt2: GPT2LMHeadModel with activation_function "gelu" (our exact GELU,
//                           not GPT-2's tanh "gelu_new"), our layer_norm_epsilon, no dropout, the
//                           attention scaled by 1/sqrt(head_dim) only; both: "dtype" and
//                           "torch_dtype" float32, tie_word_embeddings false (our head is its own)
//   model.safetensors       __metadata__ {"format": "pt"}; the tensors named by the architecture's
//                           table (worker/model/arch_table.h), float32; gpt2's Conv1D weights
//                           (c_attn, c_proj, c_fc) stored [in, out], as GPT-2 holds them
//   or model-0000k-of-0000n.safetensors + model.safetensors.index.json when the tensors exceed
//                           max_shard_bytes (whole tensors per shard, in table order)
//   generation_config.json  the token ids the source checkpoint named (none for a byte vocabulary)
//   the source's tokenizer files (tokenizer.json, tokenizer.model, ...) when the job was imported
//                           from a local Hugging Face folder (spec.model.init.from)
// A gpt2 job with shared layers is refused (hf_export_refusal says why).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "worker/model/config.h"
#include "worker/model/stage.h"

namespace swarm::runtime {

// Why a config cannot be written in Hugging Face's layout, or nothing: only a gpt2 model with
// shared layers (ALBERT-style, one block reused by a stage's layers) is refused, since
// GPT2LMHeadModel holds a block per layer; the swarm's own format (swarm export without
// --format) keeps it.
std::optional<std::string> hf_export_refusal(const model::ModelConfig& config);

// config.json for `config` (llama or gpt2). `source` is the imported checkpoint's config.json (or
// null): its token ids (bos/eos/pad) are carried over.
nlohmann::json hf_config_json(const model::ModelConfig& config, const nlohmann::json& source);

// generation_config.json: the source's token ids, or an empty generation config.
nlohmann::json hf_generation_config_json(const nlohmann::json& source);

// "20KB", "5GB", "500MB", "1.5GiB", "123" (bytes) -> bytes; Hugging Face's units (KB = 1000,
// KiB = 1024). Throws std::invalid_argument naming `field` and the text.
uint64_t parse_byte_size(const std::string& text, const std::string& field);

// Which tensors go in which shard: consecutive runs of `sizes` (bytes) of at most max_bytes each
// (a tensor larger than max_bytes gets a shard of its own). One shard when everything fits.
std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_bytes);

struct HfExportResult {
  std::string dir;
  std::vector<std::string> files;  // written, in the folder
  size_t tensors = 0;
  uint64_t bytes = 0;  // of the safetensors files
};

// Writes the folder `out_dir` (created; files in it replaced) for the stages of `spec`'s model at
// `step`. Throws std::invalid_argument for a config hf_export_refusal refuses, std::runtime_error
// naming the file that cannot be written.
HfExportResult export_hf(const JobSpec& spec, const std::vector<std::shared_ptr<model::StageModel>>& stages,
                         int64_t step, const std::string& out_dir, uint64_t max_shard_bytes);

}  // namespace swarm::runtime
