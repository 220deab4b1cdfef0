// Architectures as data: one declarative table of tensors per architecture, mapping the names a
// StageModel gives its parameters to Hugging Face's (as llama.cpp's llama-arch.cpp and torchtitan's
// state-dict adapters do). The tables are the one place these names live: StageModel registers its
// layers under global_block_name, the import reads, and the export writes, by stage_tensors.
//
// Layers keep their global index on every stage: the tensors of stage k's layers are exactly
// Hugging Face's model.layers.{i} (llama) / transformer.h.{i} (gpt2) for i in
// first_layer(k) .. first_layer(k) + layers_in(k) - 1. Stage 0 adds the embedding, the last stage
// the final norm and the LM head.
//
//   llama (LlamaForCausalLM)                     gpt2 (GPT2LMHeadModel)
//   embed.tokens      model.embed_tokens.weight   embed.tokens     transformer.wte.weight
//                                                 embed.positions  transformer.wpe.weight
//   block{i}.attn_norm  model.layers.{i}.input_layernorm.weight     block{i}.ln1_*  transformer.h.{i}.ln_1.*
//   block{i}.q|k|v_weight, _bias  ...self_attn.q|k|v_proj.*          block{i}.qkv_*  ...attn.c_attn.*   (T)
//   block{i}.o_weight, o_bias     ...self_attn.o_proj.*              block{i}.proj_* ...attn.c_proj.*   (T)
//   block{i}.mlp_norm             ...post_attention_layernorm.weight block{i}.ln2_*  ...ln_2.*
//   block{i}.gate|up|down_*       ...mlp.gate|up|down_proj.*         block{i}.fc1_*  ...mlp.c_fc.*      (T)
//                                                                    block{i}.fc2_*  ...mlp.c_proj.*    (T)
//   head.norm_weight  model.norm.weight           head.ln_*        transformer.ln_f.*
//   head.weight       lm_head.weight              head.weight      lm_head.weight
// (T): GPT-2's Conv1D stores the weight as [in, out], the transpose of ours ([out, in]); its
// c_attn is fused [q | k | v] as our qkv is, so it maps one to one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/model/config.h"

namespace swarm::model {

// Where a tensor lives: stage 0's embedding, every layer, the last stage's head.
enum class TensorPart : uint8_t { Embedding, Layer, Head };
// The sizes a tensor's shape is made of.
enum class Dim : uint8_t {
  None,          // (the second dimension of a vector)
  Vocab,         // vocab_size
  Hidden,        // hidden_size
  Sequence,      // sequence_length (gpt2's learned positions)
  QueryWidth,    // num_heads * head_dim
  KvWidth,       // num_kv_heads * head_dim
  Intermediate,  // the MLP width
  FusedQkv,      // 3 * hidden_size (gpt2)
};
// Which configurations have the tensor.
enum class Presence : uint8_t { Always, AttentionBias, MlpBias };

struct TensorRule {
  TensorPart part;
  const char* internal;  // Layer: the name after "block<i>."; otherwise the whole name
  const char* hf;        // Hugging Face's name; "{}" stands for the global layer index
  Dim rows, cols;        // our shape: [rows] or [rows, cols]
  bool transposed;       // Hugging Face stores the transpose of ours
  Presence presence;
};

// The table of `architecture`, in the order a stage registers its parameters.
const std::vector<TensorRule>& tensor_rules(Architecture architecture);

// One tensor of a stage: our name and shape, Hugging Face's name and shape.
struct StageTensor {
  std::string internal;
  std::string hf;
  std::vector<int64_t> shape;
  std::vector<int64_t> hf_shape;  // shape, reversed when transposed
  bool transposed = false;
};

// Every tensor of `stage` (its parameters, in registration order). Throws std::invalid_argument
// for a gpt2 config with shared_layers (ALBERT-style shared blocks have no Hugging Face
// counterpart) or a stage outside [0, num_stages).
std::vector<StageTensor> stage_tensors(const ModelConfig& config, int64_t stage);

// The module name of layer j of `stage`: "block<first_layer(stage) + j>", or gpt2's
// "shared_block<stage>" when shared_layers (j is then ignored). Also its initialization key.
std::string global_block_name(const ModelConfig& config, int64_t stage, int64_t j);

// Hugging Face's class and model_type: LlamaForCausalLM / llama, GPT2LMHeadModel / gpt2.
const char* hf_architecture(Architecture architecture);
const char* hf_model_type(Architecture architecture);

}  // namespace swarm::model
