#include "worker/checkpoint/export.h"

#include <torch/torch.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <fstream>
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "worker/model/optimizer.h"
#include "worker/model/state.h"
#include "common/s3_url.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/checkpoint/object_store.h"
#include "worker/runtime/job_model.h"
#include "worker/checkpoint/safetensors.h"

namespace swarm::runtime {
namespace {

// A stage's parameter name as the file names it: "block<g>.<p>" and "shared_block<s>.<p>" become
// "blocks.<g>.<p>" / "blocks.<s>.<p>"; the others stay as they are.
std::string exported_name(const std::string& name) {
  for (const char* prefix : {"block", "shared_block"}) {
    const size_t n = std::char_traits<char>::length(prefix);
    if (name.rfind(prefix, 0) == 0 && n < name.size() && std::isdigit(static_cast<unsigned char>(name[n]))) {
      return "blocks." + name.substr(n);
    }
  }
  return name;
}

// What model_config_json wrote (and, without "model_type", what exports before architectures
// wrote: gpt2 with layers_per_stage and mlp_ratio).
model::ModelConfig config_from_json(const nlohmann::json& j) {
  model::ModelConfig c;
  c.vocab_size = j.at("vocab_size").get<int64_t>();
  c.hidden_size = j.at("hidden_size").get<int64_t>();
  c.num_heads = j.at("num_heads").get<int64_t>();
  c.num_stages = j.at("num_stages").get<int64_t>();
  c.sequence_length = j.at("sequence_length").get<int64_t>();
  if (j.contains("stage_layers")) {
    c.stage_layers = j.at("stage_layers").get<std::vector<int64_t>>();
  } else {
    c.set_uniform_layers(j.at("layers_per_stage").get<int64_t>());
  }
  const std::string type = j.value("model_type", "gpt2");
  if (type == "llama") {
    c.architecture = model::Architecture::Llama;
    auto& l = c.llama;
    l.intermediate_size = j.at("intermediate_size").get<int64_t>();
    l.num_kv_heads = j.at("num_key_value_heads").get<int64_t>();
    l.head_dim = j.at("head_dim").get<int64_t>();
    l.rms_norm_eps = j.at("rms_norm_eps").get<double>();
    l.rope_theta = j.at("rope_theta").get<double>();
    if (j.contains("rope_scaling")) {
      const auto& r = j.at("rope_scaling");
      l.rope_scaling.factor = r.at("factor").get<double>();
      l.rope_scaling.low_freq_factor = r.at("low_freq_factor").get<double>();
      l.rope_scaling.high_freq_factor = r.at("high_freq_factor").get<double>();
      l.rope_scaling.original_max_position_embeddings = r.at("original_max_position_embeddings").get<int64_t>();
    }
    l.attention_bias = j.at("attention_bias").get<bool>();
    l.mlp_bias = j.at("mlp_bias").get<bool>();
  } else if (type == "gpt2") {
    c.gpt2.intermediate_size = j.contains("intermediate_size") ? j.at("intermediate_size").get<int64_t>()
                                                               : j.at("mlp_ratio").get<int64_t>() * c.hidden_size;
    c.gpt2.shared_layers = j.at("shared_layers").get<bool>();
    c.gpt2.layer_norm_eps = j.value("layer_norm_eps", 1e-5);
  } else {
    throw std::runtime_error("model_type \"" + type + "\" is neither gpt2 nor llama");
  }
  return c;
}

// The newest step every stage has a checkpoint of.
int64_t common_step(const CheckpointLocation& where, int stages) {
  const std::string& dir = where.path;
  std::set<int64_t> common;
  std::string have;
  for (int s = 0; s < stages; ++s) {
    std::set<int64_t> steps;
    for (const auto& f : list_checkpoints(where, s)) steps.insert(f.step);
    if (steps.empty()) throw std::runtime_error("export: " + dir + " has no checkpoint of stage " + std::to_string(s));
    have += (s ? "; stage " : "stage ") + std::to_string(s) + ":";
    for (int64_t r : steps) have += " " + std::to_string(r);
    if (s == 0) {
      common = steps;
    } else {
      std::set<int64_t> both;
      for (int64_t r : steps)
        if (common.count(r)) both.insert(r);
      common = std::move(both);
    }
  }
  if (common.empty()) throw std::runtime_error("export: " + dir + " has no step that every stage checkpointed (" + have + ")");
  return *common.rbegin();
}

}  // namespace

nlohmann::json model_config_json(const JobSpec& spec, int64_t step) {
  const auto c = model_config(spec);
  nlohmann::json j = {{"architecture", "swarm-operator decoder-only transformer (worker/checkpoint/export.h)"},
                      {"model_type", model::architecture_name(c.architecture)},
                      {"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden_size},
                      {"num_heads", c.num_heads},
                      {"num_layers", c.total_layers()},
                      {"num_stages", c.num_stages},
                      {"stage_layers", c.stage_layers},
                      {"sequence_length", c.sequence_length},
                      {"intermediate_size", c.intermediate_size()},
                      {"tokenizer",
                       {{"kind", to_string(spec.training.tokenizer.kind)},
                        {"model", spec.training.tokenizer.model},
                        {"file", spec.training.tokenizer.file}}},
                      {"step", step}};
  if (c.is_llama()) {
    const auto& l = c.llama;
    j["num_key_value_heads"] = l.num_kv_heads;
    j["head_dim"] = l.head_dim;
    j["rms_norm_eps"] = l.rms_norm_eps;
    j["rope_theta"] = l.rope_theta;
    if (l.rope_scaling.enabled()) {
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", l.rope_scaling.factor},
                           {"low_freq_factor", l.rope_scaling.low_freq_factor},
                           {"high_freq_factor", l.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings", l.rope_scaling.original_max_position_embeddings}};
    }
    j["attention_bias"] = l.attention_bias;
    j["mlp_bias"] = l.mlp_bias;
    j["activation"] = "silu";
  } else {
    // gpt2 with the same layers on every stage also keeps the keys exports had before
    // architectures (layers_per_stage, mlp_ratio), for readers of those.
    const bool uniform = std::all_of(c.stage_layers.begin(), c.stage_layers.end(),
                                     [&](int64_t n) { return n == c.stage_layers.front(); });
    if (uniform) j["layers_per_stage"] = c.stage_layers.front();
    if (c.gpt2.intermediate_size % c.hidden_size == 0) j["mlp_ratio"] = c.gpt2.intermediate_size / c.hidden_size;
    j["shared_layers"] = c.gpt2.shared_layers;
    j["layer_norm_eps"] = c.gpt2.layer_norm_eps;
    j["activation"] = "gelu";
  }
  return j;
}

std::vector<std::pair<std::string, at::Tensor>> exported_tensors(
    const std::vector<std::shared_ptr<model::StageModel>>& stages) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& st : stages)
    for (const auto& p : st->named_parameters())
      out.emplace_back(exported_name(p.key()), p.value());
  return out;
}

namespace {

// A scratch folder for files on their way to or from object storage, removed with it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "swarm-export.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("export: cannot create a folder in " + templ);
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

// The stages as one safetensors file and its config.json.
static ExportResult write_local_export(const JobSpec& spec, const std::vector<std::shared_ptr<model::StageModel>>& models,
                          int64_t step, const std::string& out_path) {
  TensorFile file;
  file.tensors = exported_tensors(models);
  const auto cfg = model_config_json(spec, step);
  file.metadata = {{"format", "pt"}, {"swarm.config", cfg.dump()}, {"swarm.step", std::to_string(step)}};
  std::filesystem::path out(out_path);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  write_safetensors(out_path, file);
  ExportResult r;
  r.step = step;
  r.model_path = out_path;
  r.config_path = (out.has_parent_path() ? out.parent_path() / "config.json" : std::filesystem::path("config.json")).string();
  {
    std::ofstream c(r.config_path + ".tmp");
    c << cfg.dump(2) << "\n";
    if (!c) throw std::runtime_error("export: cannot write " + r.config_path);
  }
  std::filesystem::rename(r.config_path + ".tmp", r.config_path);
  r.tensors = file.tensors.size();
  r.bytes = std::filesystem::file_size(out_path);
  return r;
}

// To a file, or to s3://bucket/key (config.json beside it, uploaded after the model, so a
// config.json names a complete model).
static ExportResult write_export(const JobSpec& spec, const std::vector<std::shared_ptr<model::StageModel>>& models,
                                 int64_t step, const std::string& out_path, const CheckpointS3Spec& s3) {
  if (!is_s3_url(out_path)) return write_local_export(spec, models, step, out_path);
  const S3Url u = parse_s3_url(out_path);
  ScratchDir scratch;
  ExportResult r = write_local_export(spec, models, step, (scratch.path / "model.safetensors").string());
  const auto slash = u.prefix.rfind('/');
  const std::string config_url = u.url_of(slash == std::string::npos ? "config.json" : u.prefix.substr(0, slash) + "/config.json");
  upload_file(s3, r.model_path, out_path);
  upload_file(s3, r.config_path, config_url);
  r.model_path = out_path;
  r.config_path = config_url;
  return r;
}

std::vector<std::shared_ptr<model::StageModel>> load_checkpointed_stages(const JobSpec& spec,
                                                                       const CheckpointLocation& where,
                                                                       const std::string& secret, int64_t* step) {
  const auto config = model_config(spec);
  const int stages = static_cast<int>(config.num_stages);
  *step = common_step(where, stages);
  const std::string key = checkpoint_key(secret);
  std::vector<std::shared_ptr<model::StageModel>> models;
  for (int s = 0; s < stages; ++s) {
    auto m = model::make_stage(config, s, 0);
    model::StageOptimizer opt(*m, optimizer_config(spec));
    CheckpointFile found;
    for (const auto& c : list_checkpoints(where, s))
      if (c.step == *step) found = c;
    model::load_state(open_checkpoint(where, found, s, key), *m, opt);
    models.push_back(std::move(m));
  }
  return models;
}

std::vector<std::shared_ptr<model::StageModel>> initial_stages(const JobSpec& spec) {
  const auto config = model_config(spec);
  std::vector<std::shared_ptr<model::StageModel>> models;
  for (int64_t s = 0; s < config.num_stages; ++s) {
    models.push_back(model::make_stage(config, s, stage_seed(spec)));
    load_model_init(spec, *models.back());  // spec.model.init: the checkpoint's tensors are the initial ones
  }
  return models;
}

ExportResult export_model(const JobSpec& spec, const CheckpointLocation& where, const std::string& secret,
                          const std::string& out_path) {
  int64_t step = 0;
  const auto models = load_checkpointed_stages(spec, where, secret, &step);
  return write_export(spec, models, step, out_path, where.s3);
}

ExportResult export_initial(const JobSpec& spec, const std::string& out_path) {
  return write_export(spec, initial_stages(spec), 0, out_path, spec.checkpoint.s3);
}

std::optional<ExportResult> export_after_training(const JobSpec& spec, const CheckpointLocation& where,
                                                 const std::string& secret, int64_t min_step, double wait_seconds) {
  if (where.path.empty()) return std::nullopt;
  const int stages = static_cast<int>(spec.pipeline.stages);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
  for (;;) {
    int64_t step = -1;
    std::string why;
    try {
      step = common_step(where, stages);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (step >= min_step) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      if (step < 0) {
        spdlog::warn("the model was not exported: {}", why);
        return std::nullopt;
      }
      spdlog::warn("export: no step >= {} that every stage checkpointed after {:.0f} s; exporting step {}", min_step,
                   wait_seconds, step);
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  try {
    auto r = export_model(spec, where, secret, export_location(where));
    spdlog::info("exported step {} of the model to {} ({} tensors, {:.1f} MB)", r.step, r.model_path, r.tensors,
                 static_cast<double>(r.bytes) / 1e6);
    return r;
  } catch (const std::exception& e) {
    spdlog::warn("the model was not exported: {}", e.what());
    return std::nullopt;
  }
}

std::string export_location(const CheckpointLocation& where) {
  if (where.object_storage()) {
    const S3Url u = parse_s3_url(where.path);
    return u.url_of(u.key("export/model.safetensors"));
  }
  return (std::filesystem::path(where.path) / "export" / "model.safetensors").string();
}

std::optional<std::string> export_at_end(const JobSpec& spec, const CheckpointLocation& where, const std::string& secret) {
  if (where.path.empty()) return std::nullopt;
  const std::string out = export_location(where);
  try {
    const auto r = export_model(spec, where, secret, out);
    spdlog::info("exported step {} of the model to {} ({} tensors, {:.1f} MB)", r.step, out, r.tensors,
                 static_cast<double>(r.bytes) / 1e6);
    return out;
  } catch (const std::exception& e) {
    spdlog::warn("the model was not exported: {}", e.what());
    return std::nullopt;
  }
}

ExportedModel load_exported(const std::string& path, const CheckpointS3Spec& s3) {
  if (is_s3_url(path)) {
    ScratchDir scratch;
    const std::string local = (scratch.path / "model.safetensors").string();
    download_file(s3, path, local);
    return load_exported(local, s3);
  }
  TensorFile f = read_safetensors(path);
  const auto it = f.metadata.find("swarm.config");
  if (it == f.metadata.end()) throw std::runtime_error("model " + path + ": no swarm.config in its metadata (not written by swarm export)");
  ExportedModel m;
  m.config_json = nlohmann::json::parse(it->second, nullptr, false);
  if (!m.config_json.is_object()) throw std::runtime_error("model " + path + ": swarm.config is not a JSON object");
  try {
    const auto& j = m.config_json;
    m.config = config_from_json(j);
    m.step = j.value("step", int64_t{0});
    model::validate(m.config);
  } catch (const std::exception& e) {
    throw std::runtime_error("model " + path + ": swarm.config: " + e.what());
  }
  std::map<std::string, at::Tensor> by_name(f.tensors.begin(), f.tensors.end());
  torch::NoGradGuard no_grad;
  for (int64_t s = 0; s < m.config.num_stages; ++s) {
    auto st = model::make_stage(m.config, s, 0);
    for (auto& p : st->named_parameters()) {
      const std::string name = exported_name(p.key());
      const auto t = by_name.find(name);
      if (t == by_name.end()) throw std::runtime_error("model " + path + ": tensor " + name + " is missing");
      if (t->second.sizes() != p.value().sizes())
        throw std::runtime_error("model " + path + ": tensor " + name + " has shape " + c10::str(t->second.sizes()) +
                                 ", the config needs " + c10::str(p.value().sizes()));
      p.value().copy_(t->second);
    }
    st->eval();
    m.stages.push_back(std::move(st));
  }
  return m;
}

at::Tensor ExportedModel::logits(const at::Tensor& ids) const {
  torch::NoGradGuard no_grad;
  at::Tensor x = ids;
  for (const auto& s : stages) x = s->forward(x);
  return x;
}

double ExportedModel::loss(const at::Tensor& ids, const at::Tensor& targets) const {
  torch::NoGradGuard no_grad;
  return stages.back()->loss(logits(ids), targets).item<double>();
}

}  // namespace swarm::runtime
