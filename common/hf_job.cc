#include "common/hf_job.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

namespace swarm {
namespace {

// A double as JSON writes it: the shortest text that reads back to the same value.
std::string num(double v) { return nlohmann::json(v).dump(); }
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

bool same(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

// The spec's values where it leaves them derived (0 or left out).
int64_t kv_heads_of(const ModelSpec& m) { return m.num_key_value_heads > 0 ? m.num_key_value_heads : m.num_heads; }
int64_t head_dim_of(const ModelSpec& m) { return m.head_dim > 0 ? m.head_dim : m.hidden_size / std::max<int64_t>(1, m.num_heads); }
int64_t intermediate_of(const ModelSpec& m) {
  return m.intermediate_size > 0 ? m.intermediate_size : m.mlp_ratio * m.hidden_size;
}

class Mismatches {
 public:
  explicit Mismatches(std::string config_path) : path_(std::move(config_path)) {}
  void check(const std::string& field, const std::string& ours, const std::string& key, const std::string& theirs) {
    if (ours != theirs) out.push_back("spec.model." + field + " is " + ours + ", " + path_ + " has " + key + " " + theirs);
  }
  void check(const std::string& field, int64_t ours, const std::string& key, int64_t theirs) {
    check(field, std::to_string(ours), key, std::to_string(theirs));
  }
  void check_number(const std::string& field, double ours, const std::string& key, double theirs) {
    if (!same(ours, theirs)) check(field, num(ours), key, num(theirs));
  }
  std::vector<std::string> out;

 private:
  std::string path_;
};

void check_rope_scaling(const ModelSpec& m, const HfModelConfig& hf, Mismatches& x) {
  const auto& r = hf.rope_scaling;
  if (!m.rope_scaling && !r.llama3) return;  // both unscaled: they agree
  if (!m.rope_scaling || !r.llama3) {
    x.check("ropeScaling", m.rope_scaling ? "llama3" : "left out", "rope scaling", r.llama3 ? "llama3" : "none");
    return;
  }
  const RopeScalingSpec& s = *m.rope_scaling;
  x.check_number("ropeScaling.factor", s.factor, "rope factor", r.factor);
  x.check_number("ropeScaling.lowFreqFactor", s.low_freq_factor, "rope low_freq_factor", r.low_freq_factor);
  x.check_number("ropeScaling.highFreqFactor", s.high_freq_factor, "rope high_freq_factor", r.high_freq_factor);
  x.check("ropeScaling.originalMaxPositionEmbeddings", s.original_max_position_embeddings,
          "rope original_max_position_embeddings", r.original_max_position_embeddings);
}

}  // namespace

int64_t hf_sequence_length(const HfModelConfig& hf, int64_t requested) {
  return requested > 0 ? requested : std::min<int64_t>(256, hf.max_position_embeddings);
}

JobSpec job_from_hf(const HfModelConfig& hf, const FromHfOptions& o) {
  JobSpec job;
  job.name = o.name;
  ModelSpec& m = job.model;
  m.architecture = Architecture::Llama;
  m.vocab_size = hf.vocab_size;
  m.hidden_size = hf.hidden_size;
  m.num_heads = hf.num_attention_heads;
  m.num_key_value_heads = hf.num_key_value_heads;
  m.head_dim = hf.head_dim;
  m.intermediate_size = hf.intermediate_size;
  m.sequence_length = hf_sequence_length(hf, o.sequence_length);
  m.norm_eps = hf.rms_norm_eps;
  m.rope_theta = hf.rope_theta;
  if (hf.rope_scaling.llama3) {
    RopeScalingSpec s;
    s.type = RopeScalingType::Llama3;
    s.factor = hf.rope_scaling.factor;
    s.low_freq_factor = hf.rope_scaling.low_freq_factor;
    s.high_freq_factor = hf.rope_scaling.high_freq_factor;
    s.original_max_position_embeddings = hf.rope_scaling.original_max_position_embeddings;
    m.rope_scaling = s;
  }
  m.attention_bias = hf.attention_bias;
  m.mlp_bias = hf.mlp_bias;
  m.init = ModelInitSpec{o.dir, ModelFormat::HuggingFace};
  job.pipeline.stages = static_cast<int64_t>(o.layers_per_stage.size());
  job.pipeline.layers_per_stage = o.layers_per_stage;
  if (!o.tokenizer_model.empty()) {
    job.training.tokenizer.kind = TokenizerKind::SentencePiece;
    job.training.tokenizer.model = o.tokenizer_model;
  } else if (!o.tokenizer_json.empty()) {
    job.training.tokenizer.kind = TokenizerKind::HuggingFace;
    job.training.tokenizer.file = o.tokenizer_json;
  }
  if (!o.dataset.empty()) job.training.dataset.path = o.dataset;
  job.training.optimizer.learning_rate = o.learning_rate;
  return job;
}

std::string hf_job_yaml(const JobSpec& job, const HfModelConfig& hf, const FromHfOptions& o) {
  const ModelSpec& m = job.model;
  std::ostringstream y;
  y << "# Written by `swarm job from-hf " << o.dir << "`: a SwarmJob that goes on training the Hugging Face\n"
    << "# checkpoint " << o.dir << " (" << hf.architecture << "). Every stage's worker reads its own\n"
    << "# layers' tensors from the checkpoint when the stage has no peer and no checkpoint to start from.\n"
    << "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata:\n  name: " << job.name << "\nspec:\n"
    << "  model:                      # from config.json\n"
    << "    architecture: llama\n"
    << "    vocabSize: " << m.vocab_size << "\n"
    << "    hiddenSize: " << m.hidden_size << "\n"
    << "    numHeads: " << m.num_heads << "\n"
    << "    numKeyValueHeads: " << m.num_key_value_heads << "\n"
    << "    headDim: " << m.head_dim << "\n"
    << "    intermediateSize: " << m.intermediate_size << "\n"
    << "    sequenceLength: " << m.sequence_length << "        # config.json allows up to "
    << hf.max_position_embeddings << "\n"
    << "    normEps: " << num(m.norm_eps) << "\n"
    << "    ropeTheta: " << num(m.rope_theta) << "\n";
  if (m.rope_scaling) {
    const RopeScalingSpec& s = *m.rope_scaling;
    y << "    ropeScaling:\n      type: llama3\n      factor: " << num(s.factor) << "\n      lowFreqFactor: "
      << num(s.low_freq_factor) << "\n      highFreqFactor: " << num(s.high_freq_factor)
      << "\n      originalMaxPositionEmbeddings: " << s.original_max_position_embeddings << "\n";
  }
  y << "    attentionBias: " << (m.attention_bias.value_or(false) ? "true" : "false") << "\n"
    << "    mlpBias: " << (m.mlp_bias.value_or(false) ? "true" : "false") << "\n";
  if (hf.tie_word_embeddings)
    y << "    # config.json ties the LM head to the embedding (tie_word_embeddings): imported untied, the\n"
      << "    # last stage's head starts as a copy of model.embed_tokens.weight and trains on its own.\n";
  y << "    init:\n      from: " << quoted(m.init->from) << "\n      format: huggingface\n"
    << "  pipeline:\n    stages: " << job.pipeline.stages << "\n    layersPerStage: [";
  for (size_t i = 0; i < job.pipeline.layers_per_stage.size(); ++i)
    y << (i ? ", " : "") << job.pipeline.layers_per_stage[i];
  y << "]   # " << hf.num_hidden_layers << " layers; the first stage also holds the embedding, the last the head\n"
    << "  training:\n";
  if (job.training.tokenizer.kind == TokenizerKind::SentencePiece) {
    y << "    tokenizer:\n      kind: sentencepiece\n      model: " << quoted(job.training.tokenizer.model) << "\n";
  } else if (job.training.tokenizer.kind == TokenizerKind::HuggingFace) {
    y << "    # The checkpoint's tokenizer.json: the trainers read token files only; pre-tokenize the data\n"
      << "    # (scripts/hf_tokenize.py --tokenizer FILE DATA --out F.tok) and name F.tok below.\n"
      << "    tokenizer:\n      kind: huggingface\n      file: " << quoted(job.training.tokenizer.file) << "\n";
  }
  y << "    dataset:\n      path: " << quoted(job.training.dataset.path) << "\n"
    << "    optimizer:\n      learningRate: " << num(job.training.optimizer.learning_rate)
    << "   # fine-tuning (--learning-rate): well below a pre-training rate\n";
  return y.str();
}

std::vector<std::string> hf_model_mismatches(const JobSpec& spec, const HfModelConfig& hf, const std::string& config_path) {
  const ModelSpec& m = spec.model;
  Mismatches x(config_path);
  x.check("architecture", to_string(m.architecture), "model_type", hf.model_type);
  const auto layers = stage_layers(spec);
  const int64_t total = std::accumulate(layers.begin(), layers.end(), int64_t{0});
  if (total != hf.num_hidden_layers)
    x.out.push_back("the stages' layers (spec.pipeline.layersPerStage or spec.model.layersPerStage) sum to " +
                    std::to_string(total) + ", " + config_path + " has num_hidden_layers " +
                    std::to_string(hf.num_hidden_layers));
  x.check("vocabSize", m.vocab_size, "vocab_size", hf.vocab_size);
  x.check("hiddenSize", m.hidden_size, "hidden_size", hf.hidden_size);
  x.check("numHeads", m.num_heads, "num_attention_heads", hf.num_attention_heads);
  x.check("numKeyValueHeads", kv_heads_of(m), "num_key_value_heads", hf.num_key_value_heads);
  x.check("headDim", head_dim_of(m), "head_dim", hf.head_dim);
  x.check("intermediateSize", intermediate_of(m), "intermediate_size", hf.intermediate_size);
  x.check_number("normEps", m.norm_eps, "rms_norm_eps", hf.rms_norm_eps);
  x.check_number("ropeTheta", m.rope_theta, "rope_theta", hf.rope_theta);
  check_rope_scaling(m, hf, x);
  x.check("attentionBias", m.attention_bias.value_or(false) ? "true" : "false", "attention_bias",
          hf.attention_bias ? "true" : "false");
  x.check("mlpBias", m.mlp_bias.value_or(false) ? "true" : "false", "mlp_bias", hf.mlp_bias ? "true" : "false");
  return x.out;
}

}  // namespace swarm
