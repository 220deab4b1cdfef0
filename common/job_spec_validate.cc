// The validation rules of a SwarmJob spec: one rule per check, every broken rule reported.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/job_spec_internal.h"
#include "common/s3_url.h"

namespace swarm::detail {
namespace {

struct Bound {
  double value;
  bool inclusive;
};
Bound ge(double v) { return {v, true}; }
Bound gt(double v) { return {v, false}; }
Bound le(double v) { return {v, true}; }
Bound lt(double v) { return {v, false}; }

class Rules {
 public:
  explicit Rules(Issues& issues) : issues_(issues) {}

  // False when decoding already reported this path: its value is a default, not the user's.
  bool ok(const std::string& path) const { return !issues_.failed(path); }
  void error(const std::string& path, std::string message) {
    issues_.add(path, std::move(message));
  }

  // Each check returns whether the value was checked and holds, so that cross-field rules only
  // run on values that are individually fine.
  bool range(const std::string& path, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (!ok(path)) return false;
    const std::string got = ", got " + std::to_string(v);
    if (v < lo) return fail(path, "must be >= " + std::to_string(lo) + got);
    if (v > hi) return fail(path, "must be <= " + std::to_string(hi) + got);
    return true;
  }

  bool at_least(const std::string& path, std::int64_t v, std::int64_t lo) {
    return range(path, v, lo, INT64_MAX);
  }

  bool number(const std::string& path, double v, std::optional<Bound> lo, std::optional<Bound> hi) {
    if (!ok(path)) return false;
    const std::string got = ", got " + describe_number(v);
    if (!std::isfinite(v)) return fail(path, "must be a finite number" + got);
    if (lo && (lo->inclusive ? v < lo->value : v <= lo->value)) {
      return fail(path, std::string("must be ") + (lo->inclusive ? ">= " : "> ") +
                            describe_number(lo->value) + got);
    }
    if (hi && (hi->inclusive ? v > hi->value : v >= hi->value)) {
      return fail(path, std::string("must be ") + (hi->inclusive ? "<= " : "< ") +
                            describe_number(hi->value) + got);
    }
    return true;
  }

  bool non_empty(const std::string& path, const std::string& v) {
    if (!ok(path)) return false;
    if (v.empty()) return fail(path, "must not be empty");
    return true;
  }

 private:
  bool fail(const std::string& path, std::string message) {
    error(path, std::move(message));
    return false;
  }
  Issues& issues_;
};

bool is_env_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Kubernetes Secret keys: [-._a-zA-Z0-9]+, at most 253 characters.
bool is_secret_key(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return true;
}

void check_metadata(const JobSpec& s, Rules& r) {
  if (r.ok("apiVersion") && s.api_version != kSwarmJobApiVersion) {
    r.error("apiVersion",
            "must be " + quote(kSwarmJobApiVersion) + ", got " + quote(s.api_version));
  }
  if (r.ok("kind") && s.kind != kSwarmJobKind) {
    r.error("kind", "must be " + quote(kSwarmJobKind) + ", got " + quote(s.kind));
  }
  const std::string dns_rule =
      "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a "
      "letter or digit), got ";
  if (r.non_empty("metadata.name", s.name)) {
    if (s.name.size() > kMaxJobNameLength) {
      r.error("metadata.name", "must be at most " + std::to_string(kMaxJobNameLength) +
                                   " characters (pod names append suffixes), got " +
                                   quote(s.name) + " (" + std::to_string(s.name.size()) +
                                   " characters)");
    } else if (!is_dns1123_label(s.name)) {
      r.error("metadata.name", dns_rule + quote(s.name));
    }
  }
  if (r.non_empty("metadata.namespace", s.namespace_) && !is_dns1123_label(s.namespace_)) {
    r.error("metadata.namespace", dns_rule + quote(s.namespace_));
  }
}

// Which of spec.model's values were checked and hold: the architecture rules look at those only,
// so that one bad value gets one message.
struct ModelShapeOk {
  bool hidden = false, heads = false, head_dim = false, kv_heads = false, rope_theta = false;
};

// spec.model: the fields both architectures have.
ModelShapeOk check_model_shape(const ModelSpec& m, Rules& r) {
  const std::string p = "spec.model.";
  ModelShapeOk ok;
  r.range(p + "vocabSize", m.vocab_size, 2, 1000000);
  ok.hidden = r.range(p + "hiddenSize", m.hidden_size, 8, 65536);
  ok.heads = r.range(p + "numHeads", m.num_heads, 1, 256);
  ok.head_dim = r.range(p + "headDim", m.head_dim, 0, 1024);
  if (ok.hidden && ok.heads && ok.head_dim && m.head_dim == 0 && m.hidden_size % m.num_heads != 0) {
    // (Unless spec.model.headDim is set: llama heads may be wider or narrower than hiddenSize / numHeads.)
    r.error(p + "hiddenSize", "must be a multiple of spec.model.numHeads (" + std::to_string(m.num_heads) +
                                  "), got " + std::to_string(m.hidden_size));
    ok.hidden = false;
  }
  r.range(p + "layersPerStage", m.layers_per_stage, 1, 256);
  r.range(p + "sequenceLength", m.sequence_length, 2, 65536);
  r.range(p + "mlpRatio", m.mlp_ratio, 1, 16);
  r.range(p + "intermediateSize", m.intermediate_size, 0, 1048576);
  ok.kv_heads = r.range(p + "numKeyValueHeads", m.num_key_value_heads, 0, 256);
  r.number(p + "normEps", m.norm_eps, gt(0), le(0.1));
  ok.rope_theta = r.number(p + "ropeTheta", m.rope_theta, gt(0), std::nullopt);
  return ok;
}

// gpt2: the llama-only fields must say nothing (left out, or the value gpt2 has anyway).
void check_gpt2(const ModelSpec& m, const ModelShapeOk& ok, Rules& r) {
  const std::string p = "spec.model.";
  const std::string why = " needs spec.model.architecture llama (this job's is gpt2)";
  if (ok.kv_heads && ok.heads && m.num_key_value_heads != 0 && m.num_key_value_heads != m.num_heads) {
    r.error(p + "numKeyValueHeads", "grouped-query attention" + why + ": leave it out, got " +
                                        std::to_string(m.num_key_value_heads));
  }
  if (ok.head_dim && ok.heads && ok.hidden && m.head_dim != 0 && m.head_dim * m.num_heads != m.hidden_size) {
    r.error(p + "headDim", "a head width other than hiddenSize / numHeads" + why + ": leave it out, got " +
                               std::to_string(m.head_dim));
  }
  if (ok.rope_theta && m.rope_theta != ModelSpec{}.rope_theta) {
    r.error(p + "ropeTheta", "rotary positions" + why + " (gpt2 learns its positions): leave it out, got " +
                                 describe_number(m.rope_theta));
  }
  if (m.rope_scaling) r.error(p + "ropeScaling", "rotary scaling" + why + ": leave it out");
  if (m.attention_bias && !*m.attention_bias) {
    r.error(p + "attentionBias", "gpt2 blocks always have attention biases (a block without" + why + "), got false");
  }
  if (m.mlp_bias && !*m.mlp_bias) {
    r.error(p + "mlpBias", "gpt2 blocks always have MLP biases (a block without" + why + "), got false");
  }
  if (m.init) {
    r.error(p + "init", "importing a Hugging Face checkpoint" + why + " (Llama-family checkpoints), got from " +
                            quote(m.init->from));
  }
}

void check_llama(const ModelSpec& m, const ModelShapeOk& ok, Rules& r) {
  const std::string p = "spec.model.";
  if (r.ok(p + "sharedLayers") && m.shared_layers) {
    r.error(p + "sharedLayers", "ALBERT-style sharing needs spec.model.architecture gpt2 (this job's is llama), got true");
  }
  if (ok.heads && ok.kv_heads && m.num_key_value_heads > 0 && m.num_heads % m.num_key_value_heads != 0) {
    r.error(p + "numKeyValueHeads", "must divide spec.model.numHeads (" + std::to_string(m.num_heads) + "), got " +
                                        std::to_string(m.num_key_value_heads));
  }
  if (ok.head_dim && m.head_dim % 2 != 0) {
    r.error(p + "headDim", "must be even (rotary embeddings turn pairs of values), got " + std::to_string(m.head_dim));
  } else if (ok.head_dim && m.head_dim == 0 && ok.hidden && ok.heads && (m.hidden_size / m.num_heads) % 2 != 0) {
    r.error(p + "headDim", "left out, it is hiddenSize / numHeads = " + std::to_string(m.hidden_size / m.num_heads) +
                               ", which must be even (rotary embeddings turn pairs of values): set an even headDim");
  }
  if (m.rope_scaling) {
    const RopeScalingSpec& s = *m.rope_scaling;
    const std::string q = p + "ropeScaling.";
    r.number(q + "factor", s.factor, ge(1), le(1024));
    bool low = r.number(q + "lowFreqFactor", s.low_freq_factor, gt(0), std::nullopt);
    bool high = r.number(q + "highFreqFactor", s.high_freq_factor, gt(0), std::nullopt);
    if (low && high && s.high_freq_factor <= s.low_freq_factor) {
      r.error(q + "highFreqFactor", "must be > spec.model.ropeScaling.lowFreqFactor (" +
                                        describe_number(s.low_freq_factor) + "), got " +
                                        describe_number(s.high_freq_factor));
    }
    r.range(q + "originalMaxPositionEmbeddings", s.original_max_position_embeddings, 1, 1 << 24);
  }
  if (m.init && r.non_empty(p + "init.from", m.init->from) && m.init->from.rfind("s3://", 0) == 0) {
    if (auto why = s3_url_problem(m.init->from)) r.error(p + "init.from", *why);
  }
}

// spec.pipeline.layersPerStage against spec.pipeline.stages and spec.model.layersPerStage.
void check_stage_layers(const JobSpec& s, Rules& r, bool stages_ok) {
  const std::vector<std::int64_t>& list = s.pipeline.layers_per_stage;
  const std::string p = "spec.pipeline.layersPerStage";
  if (list.empty() || !r.ok(p)) return;
  for (std::size_t i = 0; i < list.size(); ++i) r.range(p + "[" + std::to_string(i) + "]", list[i], 1, 256);
  if (stages_ok && static_cast<std::int64_t>(list.size()) != s.pipeline.stages) {
    r.error(p, "needs one count per stage (spec.pipeline.stages is " + std::to_string(s.pipeline.stages) + "), got " +
                   std::to_string(list.size()));
  }
  if (r.ok("spec.model.layersPerStage") && s.model.layers_per_stage != ModelSpec{}.layers_per_stage) {
    r.error("spec.model.layersPerStage", "must be left out when spec.pipeline.layersPerStage gives each stage's "
                                         "layers, got " + std::to_string(s.model.layers_per_stage));
  }
}

void check_model(const JobSpec& s, Rules& r) {
  const ModelShapeOk ok = check_model_shape(s.model, r);
  if (s.model.architecture == Architecture::Llama) {
    check_llama(s.model, ok, r);
  } else {
    check_gpt2(s.model, ok, r);
  }
}

// spec.training.tokenizer: each kind's file field, and only its own; a huggingface tokenizer's text is
// pre-tokenised (scripts/hf_tokenize.py), so its dataset cannot be read as text.
void check_tokenizer(const TrainingSpec& t, Rules& r) {
  const std::string p = "spec.training.tokenizer.";
  const TokenizerSpec& k = t.tokenizer;
  const std::string kind = to_string(k.kind);
  if (k.kind == TokenizerKind::SentencePiece) {
    if (r.ok(p + "model") && k.model.empty())
      r.error(p + "model",
              "is required with spec.training.tokenizer.kind sentencepiece (the SentencePiece .model file), got \"\"");
  } else if (!k.model.empty()) {
    r.error(p + "model", "is only for kind sentencepiece (kind is " + kind + "), got \"" + k.model + "\"");
  }
  if (k.kind == TokenizerKind::HuggingFace) {
    if (r.ok(p + "file") && k.file.empty())
      r.error(p + "file", "is required with spec.training.tokenizer.kind huggingface (the tokenizer.json), got \"\"");
    const DatasetFormat f = t.dataset.format;
    if (r.ok("spec.training.dataset.format") && (f == DatasetFormat::Text || f == DatasetFormat::Jsonl))
      r.error("spec.training.dataset.format",
              std::string("must be tokens or auto with spec.training.tokenizer.kind huggingface (its text is "
                          "pre-tokenised by scripts/hf_tokenize.py into token files), got ") +
                  quote(to_string(f)));
  } else if (!k.file.empty()) {
    r.error(p + "file", "is only for kind huggingface (kind is " + kind + "), got \"" + k.file + "\"");
  }
}

void check_training(const TrainingSpec& t, Rules& r) {
  const std::string p = "spec.training.";
  bool global = r.range(p + "globalBatch", t.global_batch, 1, std::int64_t{1} << 24);
  bool micro = r.range(p + "microbatch", t.microbatch, 1, 65536);
  if (global && micro) {
    const std::string mb = " spec.training.microbatch (" + std::to_string(t.microbatch) +
                           "), got " + std::to_string(t.global_batch);
    if (t.global_batch < t.microbatch) {
      r.error(p + "globalBatch", "must be >=" + mb);
    } else if (t.global_batch % t.microbatch != 0) {
      r.error(p + "globalBatch", "must be a multiple of" + mb);
    }
  }
  bool steps = r.at_least(p + "maxSteps", t.max_steps, 1);
  r.range(p + "evalBatches", t.eval_batches, 0, 65536);
  r.non_empty(p + "dataset.path", t.dataset.path);
  r.non_empty(p + "dataset.textField", t.dataset.text_field);
  const bool fraction = r.number(p + "dataset.validationFraction", t.dataset.validation_fraction, ge(0), le(0.5));
  if (fraction && t.dataset.validation_fraction == 0 && t.eval_batches > 0) {
    r.error(p + "dataset.validationFraction",
            "is 0 (nothing held out) while spec.training.evalBatches is " + std::to_string(t.eval_batches) +
                ": set evalBatches to 0 or hold out a fraction, got 0");
  }
  check_tokenizer(t, r);

  const std::string o = p + "optimizer.";
  r.number(o + "learningRate", t.optimizer.learning_rate, gt(0), le(10));
  r.number(o + "betas[0]", t.optimizer.beta1, ge(0), lt(1));
  r.number(o + "betas[1]", t.optimizer.beta2, ge(0), lt(1));
  r.number(o + "epsilon", t.optimizer.epsilon, gt(0), std::nullopt);
  r.number(o + "weightDecay", t.optimizer.weight_decay, ge(0), std::nullopt);
  r.number(o + "gradClip", t.optimizer.grad_clip, ge(0), std::nullopt);

  const std::string s = p + "schedule.";
  bool warmup = r.at_least(s + "warmupSteps", t.schedule.warmup_steps, 0);
  if (warmup && steps && t.schedule.warmup_steps >= t.max_steps) {
    r.error(s + "warmupSteps", "must be < spec.training.maxSteps (" +
                                   std::to_string(t.max_steps) + "), got " +
                                   std::to_string(t.schedule.warmup_steps));
  }
  r.number(s + "minLearningRateRatio", t.schedule.min_learning_rate_ratio, ge(0), le(1));
}

void check_processes(const JobSpec& s, Rules& r) {
  r.range("spec.workers.perStage", s.workers.per_stage, 1, 1024);
  const std::string& d = s.workers.device;
  if (r.ok("spec.workers.device") && d != "auto" && d != "cpu" && d != "cuda") {
    r.error("spec.workers.device", "must be one of auto, cpu, cuda, got " + quote(d));
  }
  const std::string& p = s.workers.precision;
  if (r.ok("spec.workers.precision") && p != "auto" && p != "fp32" && p != "bf16" && p != "fp16") {
    r.error("spec.workers.precision", "must be one of auto, fp32, bf16, fp16, got " + quote(p));
  }
  r.range("spec.workers.threads", s.workers.threads, 0, 1024);

  r.range("spec.trainers.count", s.trainers.count, 1, 1024);
  r.range("spec.trainers.inflightMicrobatches", s.trainers.inflight_microbatches, 1, 1024);
  const RoutingSpec& routing = s.trainers.routing;
  r.number("spec.trainers.routing.emaAlpha", routing.ema_alpha, gt(0), le(1));
  r.number("spec.trainers.routing.backwardWeight", routing.backward_weight, gt(0), std::nullopt);
  r.number("spec.trainers.routing.explorePeerSeconds", routing.explore_peer_seconds, gt(0),
           le(86400));
  r.number("spec.trainers.routing.interRegionPenaltyMs", routing.inter_region_penalty_ms, ge(0),
           le(60000));
}

void check_timeouts(const TimeoutsSpec& t, Rules& r) {
  const std::string p = "spec.timeouts.";
  auto timeout = [&](const char* name, double v) {
    return r.number(p + name, v, gt(0), le(86400));
  };
  timeout("connectSeconds", t.connect_seconds);
  timeout("forwardSeconds", t.forward_seconds);
  timeout("backwardSeconds", t.backward_seconds);
  timeout("averagingSeconds", t.averaging_seconds);
  bool heartbeat = timeout("heartbeatSeconds", t.heartbeat_seconds);
  bool expiry = timeout("peerExpirySeconds", t.peer_expiry_seconds);
  timeout("activationTtlSeconds", t.activation_ttl_seconds);
  if (heartbeat && expiry && t.peer_expiry_seconds <= t.heartbeat_seconds) {
    r.error(p + "peerExpirySeconds", "must be > spec.timeouts.heartbeatSeconds (" +
                                         describe_number(t.heartbeat_seconds) + "), got " +
                                         describe_number(t.peer_expiry_seconds));
  }
}

void check_secret(const SecretSpec& s, Rules& r) {
  if (r.non_empty("spec.secret.env", s.env) && !is_env_name(s.env)) {
    r.error("spec.secret.env",
            "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got " + quote(s.env));
  }
  if (s.secret_ref_name.empty() && s.secret_ref_key.empty()) return;  // no secretRef
  if (r.ok("spec.secret.secretRef.name")) {
    if (s.secret_ref_name.empty()) {
      r.error("spec.secret.secretRef.name", "required when secretRef is given");
    } else if (!is_dns1123_subdomain(s.secret_ref_name)) {
      r.error("spec.secret.secretRef.name",
              "must be a Kubernetes Secret name (DNS-1123 subdomain), got " +
                  quote(s.secret_ref_name));
    }
  }
  if (r.ok("spec.secret.secretRef.key")) {
    if (s.secret_ref_key.empty()) {
      r.error("spec.secret.secretRef.key", "required when secretRef is given");
    } else if (!is_secret_key(s.secret_ref_key)) {
      r.error("spec.secret.secretRef.key",
              "must be a Secret key (letters, digits, '-', '_' and '.'), got " +
                  quote(s.secret_ref_key));
    }
  }
}

// spec.checkpoint.path s3://BUCKET[/PREFIX] and spec.checkpoint.s3.
void check_object_storage(const CheckpointSpec& c, Rules& r) {
  const bool s3 = c.path.rfind("s3://", 0) == 0;
  if (s3) {
    if (auto why = s3_url_problem(c.path)) r.error("spec.checkpoint.path", *why);
  } else if (c.path.find("://") != std::string::npos) {
    r.error("spec.checkpoint.path", "must be a directory or s3://bucket[/prefix], got " + quote(c.path));
  }
  const std::string p = "spec.checkpoint.s3.";
  r.range(p + "partSizeMiB", c.s3.part_size_mib, 5, 5120);
  if (!c.s3.endpoint.empty() && c.s3.endpoint.rfind("http://", 0) != 0 && c.s3.endpoint.rfind("https://", 0) != 0)
    r.error(p + "endpoint", "must start with http:// or https://, got " + quote(c.s3.endpoint));
  for (char ch : c.s3.region) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') {
      r.error(p + "region", "must be letters, digits and '-', got " + quote(c.s3.region));
      break;
    }
  }
  if (!s3 && c.s3 != CheckpointS3Spec{})
    r.error("spec.checkpoint.s3", "applies only to an s3:// spec.checkpoint.path, got path " + quote(c.path));
}

void check_elasticity(const JobSpec& s, Rules& r) {
  const std::string p = "spec.rebalancing.";
  r.number(p + "periodSeconds", s.rebalancing.period_seconds, gt(0), le(86400));
  bool min_ok = r.range(p + "minPeersPerStage", s.rebalancing.min_peers_per_stage, 1, 1024);
  r.number(p + "minGain", s.rebalancing.min_gain, ge(0), le(10));
  r.number(p + "cooldownSeconds", s.rebalancing.cooldown_seconds, ge(0), le(86400));
  if (min_ok && r.ok("spec.workers.perStage") && s.workers.per_stage >= 1 &&
      s.rebalancing.min_peers_per_stage > s.workers.per_stage) {
    r.error(p + "minPeersPerStage", "must be <= spec.workers.perStage (" +
                                        std::to_string(s.workers.per_stage) + "), got " +
                                        std::to_string(s.rebalancing.min_peers_per_stage));
  }
  r.at_least("spec.checkpoint.everySteps", s.checkpoint.every_steps, 1);
  r.range("spec.checkpoint.keep", s.checkpoint.keep, 1, 1000);
  check_object_storage(s.checkpoint, r);
}

}  // namespace

void validate_job_spec(const JobSpec& spec, Issues& issues) {
  Rules r(issues);
  check_metadata(spec, r);
  check_model(spec, r);
  check_stage_layers(spec, r, r.range("spec.pipeline.stages", spec.pipeline.stages, 2, 64));
  r.range("spec.pipeline.blockSize", spec.pipeline.block_size, 16, 65535);
  r.range("spec.averaging.blockSize", spec.averaging.block_size, 16, 65535);
  r.range("spec.averaging.maxHandoffLagSteps", spec.averaging.max_handoff_lag_steps, 0, 64);
  check_training(spec.training, r);
  check_processes(spec, r);
  check_timeouts(spec.timeouts, r);
  check_secret(spec.secret, r);
  check_elasticity(spec, r);
}

}  // namespace swarm::detail
