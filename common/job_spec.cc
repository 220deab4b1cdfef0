// SpecError, enum spellings, name rules, equality, resolve_secret and the issue bookkeeping shared
// by the YAML and JSON front ends.
#include "common/job_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <tuple>
#include <utility>

#include "common/job_spec_internal.h"

namespace swarm {
namespace {

std::string join_lines(const std::vector<std::string>& errors, const std::string& source) {
  std::string out;
  for (const std::string& e : errors) {
    if (!out.empty()) out += '\n';
    if (!source.empty()) out += source + ": ";
    out += e;
  }
  return out;
}

template <class E>
struct Spelling {
  E value;
  const char* name;
};

constexpr Spelling<Transport> kTransports[] = {{Transport::Authenticated, "authenticated"},
                                               {Transport::Encrypted, "encrypted"}};
constexpr Spelling<Compression> kCompressions[] = {
    {Compression::None, "none"}, {Compression::Fp16, "fp16"}, {Compression::Blockwise8, "blockwise8"}};
constexpr Spelling<OptimizerKind> kOptimizers[] = {{OptimizerKind::AdamW, "adamw"},
                                                   {OptimizerKind::Lamb, "lamb"}};
constexpr Spelling<ScheduleKind> kSchedules[] = {{ScheduleKind::Constant, "constant"},
                                                 {ScheduleKind::Linear, "linear"},
                                                 {ScheduleKind::Cosine, "cosine"}};
constexpr Spelling<TokenizerKind> kTokenizers[] = {{TokenizerKind::Bytes, "bytes"},
                                                   {TokenizerKind::SentencePiece, "sentencepiece"},
                                                   {TokenizerKind::HuggingFace, "huggingface"}};
constexpr Spelling<DatasetFormat> kDatasetFormats[] = {{DatasetFormat::Auto, "auto"},
                                                       {DatasetFormat::Text, "text"},
                                                       {DatasetFormat::Jsonl, "jsonl"},
                                                       {DatasetFormat::Tokens, "tokens"}};
constexpr Spelling<Architecture> kArchitectures[] = {{Architecture::Gpt2, "gpt2"}, {Architecture::Llama, "llama"}};
constexpr Spelling<RopeScalingType> kRopeScalingTypes[] = {{RopeScalingType::Llama3, "llama3"}};
constexpr Spelling<ModelFormat> kModelFormats[] = {{ModelFormat::HuggingFace, "huggingface"}};

template <class E, std::size_t N>
const char* name_of(const Spelling<E> (&table)[N], E value) {
  for (const auto& s : table) {
    if (s.value == value) return s.name;
  }
  return "?";
}

template <class E, std::size_t N>
std::optional<E> value_of(const Spelling<E> (&table)[N], std::string_view name) {
  for (const auto& s : table) {
    if (name == s.name) return s.value;
  }
  return std::nullopt;
}

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

SpecError::SpecError(std::vector<std::string> errors, std::string source)
    : std::runtime_error(join_lines(errors, source)),
      errors_(std::move(errors)),
      source_(std::move(source)) {}

const char* to_string(Compression c) { return name_of(kCompressions, c); }
const char* to_string(Transport t) { return name_of(kTransports, t); }
std::optional<Transport> parse_transport(std::string_view s) { return value_of(kTransports, s); }
const char* to_string(OptimizerKind k) { return name_of(kOptimizers, k); }
const char* to_string(ScheduleKind k) { return name_of(kSchedules, k); }
const char* to_string(TokenizerKind k) { return name_of(kTokenizers, k); }
std::optional<TokenizerKind> parse_tokenizer_kind(std::string_view s) { return value_of(kTokenizers, s); }
const char* to_string(DatasetFormat f) { return name_of(kDatasetFormats, f); }
std::optional<DatasetFormat> parse_dataset_format(std::string_view s) { return value_of(kDatasetFormats, s); }
const char* to_string(Architecture a) { return name_of(kArchitectures, a); }
std::optional<Architecture> parse_architecture(std::string_view s) { return value_of(kArchitectures, s); }
const char* to_string(RopeScalingType t) { return name_of(kRopeScalingTypes, t); }
std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view s) { return value_of(kRopeScalingTypes, s); }
const char* to_string(ModelFormat f) { return name_of(kModelFormats, f); }
std::optional<ModelFormat> parse_model_format(std::string_view s) { return value_of(kModelFormats, s); }
std::optional<Compression> parse_compression(std::string_view s) {
  return value_of(kCompressions, s);
}
std::optional<OptimizerKind> parse_optimizer_kind(std::string_view s) {
  return value_of(kOptimizers, s);
}
std::optional<ScheduleKind> parse_schedule_kind(std::string_view s) {
  return value_of(kSchedules, s);
}

bool is_dns1123_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!is_lower_alnum(s.front()) || !is_lower_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
}

bool is_dns1123_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (!is_dns1123_label(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool operator==(const RopeScalingSpec& a, const RopeScalingSpec& b) {
  return std::tie(a.type, a.factor, a.low_freq_factor, a.high_freq_factor, a.original_max_position_embeddings) ==
         std::tie(b.type, b.factor, b.low_freq_factor, b.high_freq_factor, b.original_max_position_embeddings);
}
bool operator==(const ModelInitSpec& a, const ModelInitSpec& b) {
  return a.from == b.from && a.format == b.format;
}
bool operator==(const ModelSpec& a, const ModelSpec& b) {
  return std::tie(a.architecture, a.vocab_size, a.hidden_size, a.num_heads, a.layers_per_stage, a.sequence_length,
                  a.mlp_ratio, a.shared_layers, a.intermediate_size, a.num_key_value_heads, a.head_dim, a.norm_eps,
                  a.rope_theta, a.rope_scaling, a.attention_bias, a.mlp_bias, a.init) ==
         std::tie(b.architecture, b.vocab_size, b.hidden_size, b.num_heads, b.layers_per_stage, b.sequence_length,
                  b.mlp_ratio, b.shared_layers, b.intermediate_size, b.num_key_value_heads, b.head_dim, b.norm_eps,
                  b.rope_theta, b.rope_scaling, b.attention_bias, b.mlp_bias, b.init);
}
bool operator==(const PipelineSpec& a, const PipelineSpec& b) {
  return a.stages == b.stages && a.compression == b.compression && a.block_size == b.block_size &&
         a.layers_per_stage == b.layers_per_stage && a.recompute_activations == b.recompute_activations;
}
bool operator==(const AveragingSpec& a, const AveragingSpec& b) {
  return a.compression == b.compression && a.block_size == b.block_size;
}
bool operator==(const TokenizerSpec& a, const TokenizerSpec& b) {
  return std::tie(a.kind, a.model, a.file) == std::tie(b.kind, b.model, b.file);
}
bool operator==(const DatasetSpec& a, const DatasetSpec& b) {
  return std::tie(a.path, a.format, a.text_field, a.validation_fraction) ==
         std::tie(b.path, b.format, b.text_field, b.validation_fraction);
}
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b) {
  return std::tie(a.name, a.learning_rate, a.beta1, a.beta2, a.epsilon, a.weight_decay,
                  a.grad_clip) == std::tie(b.name, b.learning_rate, b.beta1, b.beta2, b.epsilon,
                                           b.weight_decay, b.grad_clip);
}
bool operator==(const ScheduleSpec& a, const ScheduleSpec& b) {
  return std::tie(a.kind, a.warmup_steps, a.min_learning_rate_ratio) ==
         std::tie(b.kind, b.warmup_steps, b.min_learning_rate_ratio);
}
bool operator==(const TrainingSpec& a, const TrainingSpec& b) {
  return std::tie(a.global_batch, a.microbatch, a.max_steps, a.eval_batches, a.seed, a.tokenizer, a.dataset,
                  a.optimizer, a.schedule) == std::tie(b.global_batch, b.microbatch, b.max_steps, b.eval_batches,
                                                       b.seed, b.tokenizer, b.dataset, b.optimizer, b.schedule);
}
bool operator==(const WorkersSpec& a, const WorkersSpec& b) {
  return std::tie(a.per_stage, a.device, a.precision, a.threads) ==
         std::tie(b.per_stage, b.device, b.precision, b.threads);
}
bool operator==(const RoutingSpec& a, const RoutingSpec& b) {
  return std::tie(a.ema_alpha, a.backward_weight, a.explore_peer_seconds, a.inter_region_penalty_ms) ==
         std::tie(b.ema_alpha, b.backward_weight, b.explore_peer_seconds, b.inter_region_penalty_ms);
}
bool operator==(const TrainersSpec& a, const TrainersSpec& b) {
  return std::tie(a.count, a.inflight_microbatches, a.routing) ==
         std::tie(b.count, b.inflight_microbatches, b.routing);
}
bool operator==(const TimeoutsSpec& a, const TimeoutsSpec& b) {
  return std::tie(a.connect_seconds, a.forward_seconds, a.backward_seconds, a.averaging_seconds,
                  a.heartbeat_seconds, a.peer_expiry_seconds, a.activation_ttl_seconds) ==
         std::tie(b.connect_seconds, b.forward_seconds, b.backward_seconds, b.averaging_seconds,
                  b.heartbeat_seconds, b.peer_expiry_seconds, b.activation_ttl_seconds);
}
bool operator==(const SecretSpec& a, const SecretSpec& b) {
  return std::tie(a.env, a.secret_ref_name, a.secret_ref_key) ==
         std::tie(b.env, b.secret_ref_name, b.secret_ref_key);
}
bool operator==(const SecuritySpec& a, const SecuritySpec& b) { return a.transport == b.transport; }

bool operator==(const RebalancingSpec& a, const RebalancingSpec& b) {
  return std::tie(a.enabled, a.period_seconds, a.min_peers_per_stage, a.min_gain, a.cooldown_seconds) ==
         std::tie(b.enabled, b.period_seconds, b.min_peers_per_stage, b.min_gain, b.cooldown_seconds);
}
bool operator==(const CheckpointS3Spec& a, const CheckpointS3Spec& b) {
  return std::tie(a.endpoint, a.region, a.path_style, a.part_size_mib) ==
         std::tie(b.endpoint, b.region, b.path_style, b.part_size_mib);
}
bool operator==(const CheckpointSpec& a, const CheckpointSpec& b) {
  return std::tie(a.path, a.every_steps, a.keep, a.s3) == std::tie(b.path, b.every_steps, b.keep, b.s3);
}
bool operator==(const JobSpec& a, const JobSpec& b) {
  return std::tie(a.api_version, a.kind, a.name, a.namespace_, a.model, a.pipeline, a.averaging, a.training,
                  a.workers, a.trainers, a.timeouts, a.secret, a.rebalancing, a.checkpoint, a.security) ==
         std::tie(b.api_version, b.kind, b.name, b.namespace_, b.model, b.pipeline, b.averaging, b.training,
                  b.workers, b.trainers, b.timeouts, b.secret, b.rebalancing, b.checkpoint, b.security);
}

std::vector<std::int64_t> stage_layers(const JobSpec& spec) {
  if (!spec.pipeline.layers_per_stage.empty()) return spec.pipeline.layers_per_stage;
  return std::vector<std::int64_t>(static_cast<std::size_t>(std::max<std::int64_t>(0, spec.pipeline.stages)),
                                   spec.model.layers_per_stage);
}

std::vector<std::string> validate_job_spec(const JobSpec& spec) {
  detail::Issues issues;
  detail::validate_job_spec(spec, issues);
  return issues.format();
}

void check_job_spec(const JobSpec& spec) {
  std::vector<std::string> errors = validate_job_spec(spec);
  if (!errors.empty()) throw SpecError(std::move(errors));
}

std::string resolve_secret(const SecretSpec& secret) {
  const char* value = secret.env.empty() ? nullptr : std::getenv(secret.env.c_str());
  if (value == nullptr || *value == '\0') {
    throw SpecError("spec.secret.env: environment variable " +
                    (secret.env.empty() ? std::string("(empty name)") : secret.env) +
                    " is not set or empty");
  }
  return value;
}

std::string resolve_previous_secret(const SecretSpec& secret) {
  const char* value = secret.env.empty() ? nullptr : std::getenv((secret.env + "_PREVIOUS").c_str());
  return value == nullptr ? std::string() : std::string(value);
}

namespace detail {

void Issues::add(std::string path, std::string message, std::optional<Location> loc) {
  list_.push_back(Issue{std::move(path), std::move(message), loc});
}

void Issues::fail(const std::string& path, std::string message) {
  failed_.push_back(path);
  add(path, std::move(message));
}

bool Issues::failed(const std::string& path) const {
  for (const std::string& f : failed_) {
    if (f.empty()) return true;  // the whole document
    if (path.compare(0, f.size(), f) != 0) continue;
    if (path.size() == f.size() || path[f.size()] == '.' || path[f.size()] == '[') return true;
  }
  return false;
}

std::vector<std::string> Issues::format(const std::map<std::string, Location>& where) const {
  std::vector<Issue> sorted = list_;
  for (Issue& issue : sorted) {
    if (issue.location) continue;
    auto it = where.find(issue.path);
    if (it != where.end()) issue.location = it->second;
  }
  // Issues with a position come first, in document order; the others keep their order.
  std::stable_sort(sorted.begin(), sorted.end(), [](const Issue& a, const Issue& b) {
    if (!a.location) return false;
    if (!b.location) return true;
    return std::tie(a.location->line, a.location->column) <
           std::tie(b.location->line, b.location->column);
  });
  std::vector<std::string> out;
  for (const Issue& issue : sorted) {
    std::string line = issue.path.empty() ? issue.message : issue.path + ": " + issue.message;
    if (issue.location) {
      line += " (line " + std::to_string(issue.location->line) + ", column " +
              std::to_string(issue.location->column) + ")";
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::string join_path(const std::string& parent, const std::string& key) {
  bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') plain = false;
  }
  if (!plain) return parent + "[" + quote(key) + "]";
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

std::string quote(const std::string& s) {
  constexpr std::size_t kMax = 80;
  std::string text = s.size() > kMax ? s.substr(0, kMax) : s;
  // dump() escapes control characters and quotes; `replace` keeps invalid UTF-8 printable.
  std::string out =
      nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > kMax) out.insert(out.size() - 1, "...");
  return out;
}

std::string describe_number(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  // Whole numbers print without a fraction: "got 0", not "got 0.0".
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<long long>(value));
  }
  return nlohmann::json(value).dump();
}

std::string describe(const nlohmann::json& value) {
  constexpr std::size_t kMax = 80;
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return quote(value.get<std::string>());
    case nlohmann::json::value_t::number_float:
      return describe_number(value.get<double>());
    case nlohmann::json::value_t::object:
    case nlohmann::json::value_t::array: {
      std::string text =
          value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (text.size() > kMax) text = text.substr(0, kMax) + "...";
      return text;
    }
    default:
      return value.dump();
  }
}

JobSpec decode_and_validate(const nlohmann::json& doc, Issues& issues,
                            const std::map<std::string, Location>& where,
                            const std::string& source) {
  JobSpec spec;
  decode_job_spec(doc, spec, issues);
  validate_job_spec(spec, issues);
  if (!issues.empty()) throw SpecError(issues.format(where), source);
  return spec;
}

}  // namespace detail
}  // namespace swarm
