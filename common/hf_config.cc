#include "common/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace swarm {
namespace {

using nlohmann::json;

constexpr int64_t kMaxSize = int64_t{1} << 31;  // no dimension of a model is near this

// A value as an error shows it: JSON, cut after 80 bytes.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

class Reader {
 public:
  Reader(const json& j, std::string where, std::string prefix = "")
      : j_(j), where_(std::move(where)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw HfConfigError(where_ + ": " + prefix_ + key + ": " + why);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why, const json& got) const {
    fail(key, why + ", got " + shown(got));
  }
  // Present and not null.
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& at(const std::string& key) const { return j_.at(key); }

  int64_t size(const std::string& key) const {
    if (!has(key)) fail(key, "missing (a Llama config.json has it)");
    return size_or(key, 0);
  }
  int64_t size_or(const std::string& key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > kMaxSize)
      fail(key, "must be a positive integer up to " + std::to_string(kMaxSize), v);
    return v.get<int64_t>();
  }
  double positive_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail(key, "must be a positive number", v);
    return v.get<double>();
  }
  bool flag_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(key, "must be true or false", j_.at(key));
    return j_.at(key).get<bool>();
  }
  std::string text_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) fail(key, "must be a string", j_.at(key));
    return j_.at(key).get<std::string>();
  }

 private:
  const json& j_;
  std::string where_, prefix_;
};

// What the model is: LlamaForCausalLM, model_type llama, SiLU-gated MLP.
void read_identity(const Reader& r, HfModelConfig& c) {
  if (r.has("architectures")) {
    const json& a = r.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string()) r.fail("architectures", "must be a list of names", a);
    c.architecture = a[0].get<std::string>();
    if (c.architecture != "LlamaForCausalLM")
      r.fail("architectures", "only LlamaForCausalLM is imported (spec.model.architecture llama)", a);
  }
  if (!r.has("model_type") && !r.has("architectures")) r.fail("model_type", "missing (a Llama config.json has it)");
  c.model_type = r.text_or("model_type", "llama");
  if (c.model_type != "llama")
    r.fail("model_type", "only \"llama\" is imported (spec.model.architecture llama)", r.at("model_type"));
  const std::string act = r.text_or("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", "only silu (SwiGLU) is implemented", r.at("hidden_act"));
}

// The rotary settings from one object: rope_parameters, or the legacy rope_scaling (whose theta
// is the top-level rope_theta).
void read_rope_type(const Reader& r, const std::string& type_key, HfModelConfig& c) {
  const std::string type = r.text_or(type_key, "default");
  if (type == "default") return;
  if (type != "llama3") r.fail(type_key, "only the rope types default and llama3 are implemented", r.at(type_key));
  c.rope_scaling.llama3 = true;
  if (!r.has("factor")) r.fail("factor", "missing (llama3 scaling needs it)");
  c.rope_scaling.factor = r.positive_or("factor", 0);
  c.rope_scaling.low_freq_factor = r.positive_or("low_freq_factor", c.rope_scaling.low_freq_factor);
  c.rope_scaling.high_freq_factor = r.positive_or("high_freq_factor", c.rope_scaling.high_freq_factor);
  c.rope_scaling.original_max_position_embeddings =
      r.size_or("original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings);
  if (c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor)
    r.fail("high_freq_factor", "must be above low_freq_factor (" + shown(c.rope_scaling.low_freq_factor) + ")",
           c.rope_scaling.high_freq_factor);
}

void read_rope(const Reader& top, const json& j, const std::string& where, HfModelConfig& c) {
  c.rope_theta = top.positive_or("rope_theta", c.rope_theta);
  if (top.has("rope_parameters")) {
    const json& p = j.at("rope_parameters");
    if (!p.is_object()) top.fail("rope_parameters", "must be an object", p);
    const Reader r(p, where, "rope_parameters.");
    for (const auto& [k, v] : p.items())
      if (v.is_object()) r.fail(k, "per-layer-type rope parameters are not implemented", v);
    c.rope_theta = r.positive_or("rope_theta", c.rope_theta);
    read_rope_type(r, "rope_type", c);
    return;
  }
  if (!top.has("rope_scaling")) return;
  const json& s = j.at("rope_scaling");
  if (!s.is_object()) top.fail("rope_scaling", "must be an object or null", s);
  const Reader r(s, where, "rope_scaling.");
  read_rope_type(r, r.has("rope_type") ? "rope_type" : "type", c);
}

}  // namespace

HfModelConfig parse_hf_config(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw HfConfigError(where + ": not JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!j.is_object()) throw HfConfigError(where + ": not a JSON object, got " + shown(j));
  const Reader r(j, where);
  HfModelConfig c;
  read_identity(r, c);
  c.vocab_size = r.size("vocab_size");
  c.hidden_size = r.size("hidden_size");
  c.intermediate_size = r.size("intermediate_size");
  c.num_hidden_layers = r.size("num_hidden_layers");
  c.num_attention_heads = r.size("num_attention_heads");
  c.num_key_value_heads = r.size_or("num_key_value_heads", c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads",
           "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ") into equal groups",
           r.at("num_key_value_heads"));
  if (!r.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    r.fail("head_dim", "missing, and hidden_size (" + std::to_string(c.hidden_size) +
                           ") is not a multiple of num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  c.head_dim = r.size_or("head_dim", c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = r.size_or("max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = r.positive_or("rms_norm_eps", c.rms_norm_eps);
  read_rope(r, j, where, c);
  c.tie_word_embeddings = r.flag_or("tie_word_embeddings", c.tie_word_embeddings);
  c.attention_bias = r.flag_or("attention_bias", c.attention_bias);
  c.mlp_bias = r.flag_or("mlp_bias", c.mlp_bias);
  c.dtype = r.text_or("dtype", r.text_or("torch_dtype", ""));
  return c;
}

}  // namespace swarm
