// JobSpec <-> JSON, and the strict decoder both the YAML and the JSON front ends use.
#include "common/job_spec_json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/job_spec_internal.h"
#include "common/job_spec_reader.h"

namespace swarm {
namespace detail {
namespace {

using nlohmann::json;

std::string normalized(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string suggestion(const std::string& key, const std::vector<std::string>& known) {
  for (const std::string& k : known) {
    if (normalized(k) == normalized(key)) return k;  // hidden_size, HiddenSize -> hiddenSize
  }
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(key.size() < 5 ? 1 : 2, key.size() / 4);
  for (const std::string& k : known) {
    std::size_t d = edit_distance(key, k);
    if (d <= best_distance && (best.empty() || d < best_distance)) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

namespace {

void decode_metadata(Reader& root, JobSpec& out) {
  Reader m = root.object("metadata", /*required=*/true);
  m.get("name", out.name, /*required=*/true);
  m.get("namespace", out.namespace_);
  m.string_map("labels");
  m.string_map("annotations");
  // Set by Kubernetes on objects read back from the API server; accepted and ignored.
  for (const char* key : {"uid", "resourceVersion", "generation", "creationTimestamp",
                          "deletionTimestamp", "deletionGracePeriodSeconds", "generateName",
                          "selfLink", "finalizers", "ownerReferences", "managedFields"}) {
    m.ignore(key);
  }
  m.finish();
}

void decode_training(Reader& spec, TrainingSpec& t) {
  Reader r = spec.object("training");
  r.get("globalBatch", t.global_batch);
  r.get("microbatch", t.microbatch);
  r.get("maxSteps", t.max_steps);
  r.get("evalBatches", t.eval_batches);
  r.get("seed", t.seed);
  {
    Reader k = r.object("tokenizer");
    k.get_enum("kind", t.tokenizer.kind, parse_tokenizer_kind, "bytes, sentencepiece, huggingface");
    k.get("model", t.tokenizer.model);
    k.get("file", t.tokenizer.file);
    k.finish();
  }
  {
    Reader d = r.object("dataset");
    d.get("path", t.dataset.path);
    d.get_enum("format", t.dataset.format, parse_dataset_format, "auto, text, jsonl, tokens");
    d.get("textField", t.dataset.text_field);
    d.get("validationFraction", t.dataset.validation_fraction);
    d.finish();
  }
  {
    Reader o = r.object("optimizer");
    o.get_enum("name", t.optimizer.name, parse_optimizer_kind, "adamw, lamb");
    o.get("learningRate", t.optimizer.learning_rate);
    o.get_pair("betas", t.optimizer.beta1, t.optimizer.beta2);
    o.get("epsilon", t.optimizer.epsilon);
    o.get("weightDecay", t.optimizer.weight_decay);
    o.get("gradClip", t.optimizer.grad_clip);
    o.finish();
  }
  {
    Reader s = r.object("schedule");
    s.get_enum("kind", t.schedule.kind, parse_schedule_kind, "constant, linear, cosine");
    s.get("warmupSteps", t.schedule.warmup_steps);
    s.get("minLearningRateRatio", t.schedule.min_learning_rate_ratio);
    s.finish();
  }
  r.finish();
}

void decode_averaging(Reader& spec, AveragingSpec& out) {
  Reader r = spec.object("averaging");
  r.get_enum("compression", out.compression, parse_compression, "none, fp16, blockwise8");
  r.get("blockSize", out.block_size);
  r.get("maxHandoffLagSteps", out.max_handoff_lag_steps);
  r.finish();
}

void decode_workers(Reader& spec, JobSpec& out) {
  Reader r = spec.object("workers");
  r.get("perStage", out.workers.per_stage);
  r.get("device", out.workers.device);
  r.get("precision", out.workers.precision);
  r.get("threads", out.workers.threads);
  for (const char* k : {"image", "resources", "minPerStage", "maxPerStage"}) r.ignore(k, out.cluster_only_fields);
  r.finish();
}

void decode_trainers(Reader& spec, JobSpec& out) {
  TrainersSpec& t = out.trainers;
  Reader r = spec.object("trainers");
  r.get("count", t.count);
  r.get("inflightMicrobatches", t.inflight_microbatches);
  Reader routing = r.object("routing");
  routing.get("emaAlpha", t.routing.ema_alpha);
  routing.get("backwardWeight", t.routing.backward_weight);
  routing.get("explorePeerSeconds", t.routing.explore_peer_seconds);
  routing.get("interRegionPenaltyMs", t.routing.inter_region_penalty_ms);
  routing.finish();
  for (const char* k : {"image", "resources"}) r.ignore(k, out.cluster_only_fields);
  r.finish();
}

void decode_timeouts(Reader& spec, TimeoutsSpec& t) {
  Reader r = spec.object("timeouts");
  r.get("connectSeconds", t.connect_seconds);
  r.get("forwardSeconds", t.forward_seconds);
  r.get("backwardSeconds", t.backward_seconds);
  r.get("averagingSeconds", t.averaging_seconds);
  r.get("heartbeatSeconds", t.heartbeat_seconds);
  r.get("peerExpirySeconds", t.peer_expiry_seconds);
  r.get("activationTtlSeconds", t.activation_ttl_seconds);
  r.finish();
}

void decode_secret(Reader& spec, JobSpec& out) {
  Reader r = spec.object("secret");
  r.get("env", out.secret.env);
  Reader ref = r.object("secretRef");
  ref.get("name", out.secret.secret_ref_name);
  ref.get("key", out.secret.secret_ref_key);
  ref.finish();
  r.finish();
}

void decode_rebalancing(Reader& spec, RebalancingSpec& b) {
  Reader r = spec.object("rebalancing");
  r.get("enabled", b.enabled);
  r.get("periodSeconds", b.period_seconds);
  r.get("minPeersPerStage", b.min_peers_per_stage);
  r.get("minGain", b.min_gain);
  r.get("cooldownSeconds", b.cooldown_seconds);
  r.finish();
}

void decode_checkpoint(Reader& spec, JobSpec& out) {
  CheckpointSpec& c = out.checkpoint;
  Reader r = spec.object("checkpoint");
  r.get("path", c.path);
  r.get("everySteps", c.every_steps);
  r.get("keep", c.keep);
  r.ignore("volumeClaimName", out.cluster_only_fields);
  Reader s3 = r.object("s3");
  s3.get("endpoint", c.s3.endpoint);
  s3.get("region", c.s3.region);
  s3.get("pathStyle", c.s3.path_style);
  s3.get("partSizeMiB", c.s3.part_size_mib);
  s3.ignore("credentialsSecret", out.cluster_only_fields);
  s3.finish();
  r.finish();
}

void decode_security(Reader& spec, SecuritySpec& out) {
  Reader r = spec.object("security");
  r.get_enum("transport", out.transport, parse_transport, "authenticated, encrypted");
  r.finish();
}

// spec: one section after the other (the order names them in "allowed: ..." messages).
void decode_spec(Reader& root, JobSpec& out) {
  Reader spec = root.object("spec");
  decode_model(spec, out.model);
  decode_pipeline(spec, out.pipeline);
  decode_averaging(spec, out.averaging);
  decode_training(spec, out.training);
  decode_workers(spec, out);
  decode_trainers(spec, out);
  decode_timeouts(spec, out.timeouts);
  decode_secret(spec, out);
  decode_rebalancing(spec, out.rebalancing);
  decode_checkpoint(spec, out);
  decode_security(spec, out.security);
  for (const char* k : {"placement", "nodePools"}) spec.ignore(k, out.cluster_only_fields);
  spec.finish();
}

}  // namespace

void decode_job_spec(const json& doc, JobSpec& out, Issues& issues) {
  if (!doc.is_object()) {
    issues.fail("", "expected a SwarmJob manifest (an object with apiVersion, kind, metadata and "
                    "spec), got " + describe(doc));
    return;
  }
  Reader root(issues, &doc, "");
  root.get("apiVersion", out.api_version, /*required=*/true);
  root.get("kind", out.kind, /*required=*/true);
  decode_metadata(root, out);
  decode_spec(root, out);
  root.ignore("status");  // a resource read back from Kubernetes
  root.finish();
}

}  // namespace detail

namespace {

// to_json's sections, one per part of the spec.
nlohmann::json training_json(const TrainingSpec& t) {
  using nlohmann::json;
  return {{"globalBatch", t.global_batch},
          {"microbatch", t.microbatch},
          {"maxSteps", t.max_steps},
          {"evalBatches", t.eval_batches},
          {"seed", t.seed},
          {"tokenizer",
           {{"kind", to_string(t.tokenizer.kind)}, {"model", t.tokenizer.model}, {"file", t.tokenizer.file}}},
          {"dataset",
           {{"path", t.dataset.path},
            {"format", to_string(t.dataset.format)},
            {"textField", t.dataset.text_field},
            {"validationFraction", t.dataset.validation_fraction}}},
          {"optimizer",
           {{"name", to_string(t.optimizer.name)},
            {"learningRate", t.optimizer.learning_rate},
            {"betas", json::array({t.optimizer.beta1, t.optimizer.beta2})},
            {"epsilon", t.optimizer.epsilon},
            {"weightDecay", t.optimizer.weight_decay},
            {"gradClip", t.optimizer.grad_clip}}},
          {"schedule",
           {{"kind", to_string(t.schedule.kind)},
            {"warmupSteps", t.schedule.warmup_steps},
            {"minLearningRateRatio", t.schedule.min_learning_rate_ratio}}}};
}

nlohmann::json timeouts_json(const TimeoutsSpec& to) {
  return {{"connectSeconds", to.connect_seconds},
          {"forwardSeconds", to.forward_seconds},
          {"backwardSeconds", to.backward_seconds},
          {"averagingSeconds", to.averaging_seconds},
          {"heartbeatSeconds", to.heartbeat_seconds},
          {"peerExpirySeconds", to.peer_expiry_seconds},
          {"activationTtlSeconds", to.activation_ttl_seconds}};
}

nlohmann::json checkpoint_json(const CheckpointSpec& c) {
  nlohmann::json out{{"path", c.path}, {"everySteps", c.every_steps}, {"keep", c.keep}};
  if (c.s3 != CheckpointS3Spec{}) {
    nlohmann::json s3{{"endpoint", c.s3.endpoint}, {"region", c.s3.region}, {"partSizeMiB", c.s3.part_size_mib}};
    if (c.s3.path_style) s3["pathStyle"] = *c.s3.path_style;
    out["s3"] = std::move(s3);
  }
  return out;
}

nlohmann::json secret_json(const SecretSpec& secret) {
  nlohmann::json out = {{"env", secret.env}};
  if (!secret.secret_ref_name.empty() || !secret.secret_ref_key.empty())
    out["secretRef"] = {{"name", secret.secret_ref_name}, {"key", secret.secret_ref_key}};
  return out;
}

}  // namespace

nlohmann::json to_json(const JobSpec& s) {
  using nlohmann::json;
  json spec = {
      {"model", detail::model_json(s.model)},
      {"pipeline", detail::pipeline_json(s.pipeline)},
      {"averaging",
       {{"compression", to_string(s.averaging.compression)},
        {"blockSize", s.averaging.block_size},
        {"maxHandoffLagSteps", s.averaging.max_handoff_lag_steps}}},
      {"training", training_json(s.training)},
      {"workers",
       {{"perStage", s.workers.per_stage},
        {"device", s.workers.device},
        {"precision", s.workers.precision},
        {"threads", s.workers.threads}}},
      {"trainers",
       {{"count", s.trainers.count},
        {"inflightMicrobatches", s.trainers.inflight_microbatches},
        {"routing",
         {{"emaAlpha", s.trainers.routing.ema_alpha},
          {"backwardWeight", s.trainers.routing.backward_weight},
          {"explorePeerSeconds", s.trainers.routing.explore_peer_seconds},
          {"interRegionPenaltyMs", s.trainers.routing.inter_region_penalty_ms}}}}},
      {"timeouts", timeouts_json(s.timeouts)},
      {"secret", secret_json(s.secret)},
      {"rebalancing",
       {{"enabled", s.rebalancing.enabled},
        {"periodSeconds", s.rebalancing.period_seconds},
        {"minPeersPerStage", s.rebalancing.min_peers_per_stage},
        {"minGain", s.rebalancing.min_gain},
        {"cooldownSeconds", s.rebalancing.cooldown_seconds}}},
      {"checkpoint", checkpoint_json(s.checkpoint)},
  };
  if (s.security.transport) spec["security"] = {{"transport", to_string(*s.security.transport)}};
  return json{{"apiVersion", s.api_version},
              {"kind", s.kind},
              {"metadata", {{"name", s.name}, {"namespace", s.namespace_}}},
              {"spec", std::move(spec)}};
}

JobSpec job_spec_from_json(const nlohmann::json& manifest) {
  detail::Issues issues;
  return detail::decode_and_validate(manifest, issues, {}, {});
}

void to_json(nlohmann::json& out, const JobSpec& spec) { out = to_json(spec); }
void from_json(const nlohmann::json& in, JobSpec& spec) { spec = job_spec_from_json(in); }

}  // namespace swarm
