#include "worker/checkpoint/hf_export.h"

#include <torch/torch.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/s3_url.h"
#include "worker/checkpoint/safetensors.h"
#include "worker/model/arch_table.h"

namespace swarm::runtime {
namespace {

namespace fs = std::filesystem;

// Files of a Hugging Face folder that describe its tokenizer, copied to an export of a job
// imported from it.
const char* const kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                       "special_tokens_map.json", "added_tokens.json"};

void write_json(const fs::path& path, const nlohmann::json& j) {
  const std::string tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << j.dump(2) << "\n";
    if (!f) throw std::runtime_error("export: cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

// The imported checkpoint's config.json, when the job names a local folder; null otherwise.
nlohmann::json source_config(const JobSpec& spec) {
  if (!spec.model.init || is_s3_url(spec.model.init->from)) return nullptr;
  std::ifstream f(fs::path(spec.model.init->from) / "config.json");
  if (!f) return nullptr;
  auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json(nullptr);
}

std::string shard_name(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return buf;
}

// The stages' parameters under Hugging Face's names, in table order, float32 on the CPU, the
// transposed ones (gpt2's Conv1D) turned.
std::vector<std::pair<std::string, at::Tensor>> hf_tensors(const std::vector<std::shared_ptr<model::StageModel>>& stages) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& stage : stages) {
    const auto params = stage->named_parameters(true);
    for (const auto& t : model::stage_tensors(stage->config(), stage->stage_index())) {
      const at::Tensor* p = params.find(t.internal);
      if (p == nullptr) throw std::runtime_error("export: stage " + std::to_string(stage->stage_index()) +
                                                 " has no parameter " + t.internal + " (for " + t.hf + ")");
      at::Tensor v = p->detach().to(torch::kCPU, torch::kFloat);
      out.emplace_back(t.hf, (t.transposed ? v.t() : v).contiguous());
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> hf_export_refusal(const model::ModelConfig& config) {
  if (config.is_llama() || !config.gpt2.shared_layers) return std::nullopt;
  return std::string("--format huggingface: a gpt2 model with shared layers (one block per stage, applied to each of "
                     "its layers) has no GPT2LMHeadModel layout, which holds a block per layer; export it in the "
                     "swarm's own format");
}

namespace {

// GPT2LMHeadModel's config.json: the keys transformers' GPT2Config reads, with what makes its
// maths ours: the exact GELU ("gelu", not GPT-2's tanh "gelu_new"), our LayerNorm eps, attention
// scaled by 1/sqrt(head_dim) only (not by the layer index), no dropout, an untied head.
nlohmann::json gpt2_config_json(const model::ModelConfig& c) {
  return {{"architectures", nlohmann::json::array({model::hf_architecture(c.architecture)})},
          {"model_type", model::hf_model_type(c.architecture)},
          {"vocab_size", c.vocab_size},
          {"n_embd", c.hidden_size},
          {"n_layer", c.total_layers()},
          {"n_head", c.num_heads},
          {"n_inner", c.gpt2.intermediate_size},
          {"n_positions", c.sequence_length},
          {"n_ctx", c.sequence_length},
          {"activation_function", "gelu"},
          {"layer_norm_epsilon", c.gpt2.layer_norm_eps},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", false},
          {"use_cache", true},
          {"dtype", "float32"},
          {"torch_dtype", "float32"}};
}

// LlamaForCausalLM's config.json, with the legacy rope keys (rope_theta; rope_scaling with
// rope_type "llama3" when scaled), which transformers 4.x and 5 both read.
nlohmann::json llama_config_json(const model::ModelConfig& c) {
  const auto& l = c.llama;
  nlohmann::json j = {{"architectures", nlohmann::json::array({model::hf_architecture(c.architecture)})},
                      {"model_type", model::hf_model_type(c.architecture)},
                      {"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden_size},
                      {"intermediate_size", l.intermediate_size},
                      {"num_hidden_layers", c.total_layers()},
                      {"num_attention_heads", c.num_heads},
                      {"num_key_value_heads", l.num_kv_heads},
                      {"head_dim", l.head_dim},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", c.sequence_length},
                      {"rms_norm_eps", l.rms_norm_eps},
                      {"rope_theta", l.rope_theta},
                      {"rope_scaling", nullptr},
                      {"attention_bias", l.attention_bias},
                      {"attention_dropout", 0.0},
                      {"mlp_bias", l.mlp_bias},
                      {"initializer_range", 0.02},
                      {"pretraining_tp", 1},
                      {"tie_word_embeddings", false},
                      {"use_cache", true},
                      {"dtype", "float32"},
                      {"torch_dtype", "float32"}};
  if (l.rope_scaling.enabled()) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", l.rope_scaling.factor},
                         {"low_freq_factor", l.rope_scaling.low_freq_factor},
                         {"high_freq_factor", l.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", l.rope_scaling.original_max_position_embeddings}};
  }
  return j;
}

}  // namespace

nlohmann::json hf_config_json(const model::ModelConfig& c, const nlohmann::json& source) {
  nlohmann::json j = c.is_llama() ? llama_config_json(c) : gpt2_config_json(c);
  if (source.is_object()) {
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
      if (source.contains(key)) j[key] = source[key];
  }
  return j;
}

nlohmann::json hf_generation_config_json(const nlohmann::json& source) {
  nlohmann::json j = nlohmann::json::object();
  if (source.is_object()) {
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
      if (source.contains(key) && !source[key].is_null()) j[key] = source[key];
  }
  j["_from_model_config"] = true;
  return j;
}

uint64_t parse_byte_size(const std::string& text, const std::string& field) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(field + ": \"" + text + "\" is not a size (" + why +
                                 "; e.g. 5GB, 500MB, 20KB, 1GiB or a number of bytes)");
  };
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad("no number");
  }
  std::string unit = text.substr(used);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "KIB") scale = 1024.0;
  else if (unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else throw bad("unit \"" + text.substr(used) + "\"");
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > 1e18) throw bad("not between 1 byte and 1 EB");
  return static_cast<uint64_t>(bytes);
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  uint64_t in_current = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (shards.empty() || (!shards.back().empty() && in_current + sizes[i] > max_bytes)) {
      shards.emplace_back();
      in_current = 0;
    }
    shards.back().push_back(i);
    in_current += sizes[i];
  }
  if (shards.empty()) shards.emplace_back();
  return shards;
}

HfExportResult export_hf(const JobSpec& spec, const std::vector<std::shared_ptr<model::StageModel>>& stages,
                         int64_t step, const std::string& out_dir, uint64_t max_shard_bytes) {
  if (stages.empty()) throw std::invalid_argument("export: no stages");
  const auto& config = stages.front()->config();
  if (auto why = hf_export_refusal(config)) throw std::invalid_argument(*why);
  if (is_s3_url(out_dir)) throw std::invalid_argument("--out: --format huggingface writes a local folder, not " + out_dir);
  const fs::path dir(out_dir);
  fs::create_directories(dir);
  const auto tensors = hf_tensors(stages);
  std::vector<uint64_t> sizes;
  for (const auto& [name, t] : tensors) sizes.push_back(static_cast<uint64_t>(t.numel()) * 4);
  const auto shards = plan_shards(sizes, max_shard_bytes);

  HfExportResult r;
  r.dir = out_dir;
  r.tensors = tensors.size();
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string name = shards.size() == 1 ? "model.safetensors" : shard_name(k, shards.size());
    TensorFile file;
    file.metadata = {{"format", "pt"}, {"swarm.step", std::to_string(step)}};
    for (size_t i : shards[k]) {
      file.tensors.push_back(tensors[i]);
      weight_map[tensors[i].first] = name;
      total += sizes[i];
    }
    write_safetensors((dir / name).string(), file);
    r.bytes += fs::file_size(dir / name);
    r.files.push_back(name);
  }
  if (shards.size() > 1) {
    write_json(dir / "model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
    r.files.push_back("model.safetensors.index.json");
  } else {
    fs::remove(dir / "model.safetensors.index.json");  // a stale index would shadow the single file
  }
  const auto source = source_config(spec);
  write_json(dir / "config.json", hf_config_json(config, source));
  write_json(dir / "generation_config.json", hf_generation_config_json(source));
  r.files.push_back("config.json");
  r.files.push_back("generation_config.json");
  if (spec.model.init && !is_s3_url(spec.model.init->from)) {
    for (const char* f : kTokenizerFiles) {
      const fs::path from = fs::path(spec.model.init->from) / f;
      if (!fs::exists(from)) continue;
      fs::copy_file(from, dir / f, fs::copy_options::overwrite_existing);
      r.files.push_back(f);
    }
  }
  return r;
}

}  // namespace swarm::runtime
