// The SwarmJob spec: the user-facing description of one SWARM training job.
//
// The same document is read from a YAML file by `swarm local job.yaml`, is the `spec` of the
// SwarmJob custom resource the operator watches, and is handed to workers and trainers as JSON
// (see common/job_spec_json.h). Field names in YAML/JSON are the camelCase names shown next to
// each member; every default equals examples/tiny-lm.yaml, so a default-constructed JobSpec is the
// tiny-lm job and is valid.
//
//   apiVersion: swarm-operator.io/v1alpha1     (required)
//   kind: SwarmJob                             (required)
//   metadata: {name: tiny-lm, namespace: default}  (name required; labels, annotations and the
//                                                    fields Kubernetes adds are accepted, ignored)
//   spec: {model, pipeline, averaging, training, workers, trainers, timeouts, secret, rebalancing,
//          checkpoint, security}   (all optional)
//   status: ...                                (ignored)
//
// Parsing is strict: unknown fields, wrong types and out-of-range values are errors. All problems
// of a document are collected and reported together in one SpecError, each message starting with
// the full field path, e.g. `spec.pipeline.stages: must be >= 2, got 0 (line 17, column 5)`.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace swarm {

inline constexpr const char* kSwarmJobApiVersion = "swarm-operator.io/v1alpha1";
inline constexpr const char* kSwarmJobKind = "SwarmJob";
// metadata.name is at most this long: pod and service names append suffixes to it.
inline constexpr std::size_t kMaxJobNameLength = 40;

// How float tensors travel: activations and their gradients between stages (spec.pipeline), the
// gradients a stage's peers average (spec.averaging).
enum class Compression {
  None,        // "none": float32 as computed
  Fp16,        // "fp16": IEEE half precision (2 bytes a value)
  Blockwise8,  // "blockwise8": int8 codes with a float32 absmax scale per block (worker/net/blockwise8.h)
};

// How the data plane protects its frames (worker/net/session.h).
enum class Transport {
  Authenticated,  // "authenticated": every byte of every frame authenticated (AES-256-GCM tag)
  Encrypted,      // "encrypted": authenticated, and everything after each frame's header encrypted
};

enum class OptimizerKind {
  AdamW,  // "adamw"
  Lamb,   // "lamb"
};

// Learning-rate schedule after the linear warmup.
enum class ScheduleKind {
  Constant,  // "constant"
  Linear,    // "linear": linear decay to minLearningRateRatio * learningRate at maxSteps
  Cosine,    // "cosine": cosine decay to minLearningRateRatio * learningRate at maxSteps
};

// spec.model.architecture: which decoder block the stages are built of (worker/model/).
//   gpt2    pre-LayerNorm block, learned positions, fused QKV with biases, exact (erf) GELU MLP
//   llama   RMSNorm, rotary positions (Hugging Face's rotate-half), grouped-query attention,
//           SwiGLU MLP, no biases unless asked for; the LM head is never tied to the embedding
enum class Architecture { Gpt2, Llama };

// spec.model.ropeScaling (llama only): Llama 3's frequency-dependent rotary scaling, Hugging
// Face's rope_scaling {rope_type: llama3, ...}. Left out: no scaling.
enum class RopeScalingType { Llama3 };
struct RopeScalingSpec {
  RopeScalingType type = RopeScalingType::Llama3;  // type: llama3
  double factor = 8;                               // factor, [1, 1024]
  double low_freq_factor = 1;                      // lowFreqFactor, > 0
  double high_freq_factor = 4;                     // highFreqFactor, > lowFreqFactor
  std::int64_t original_max_position_embeddings = 8192;  // originalMaxPositionEmbeddings, >= 1
};

// spec.model.init: start from an existing checkpoint instead of the seeded random initialization.
enum class ModelFormat { HuggingFace };
struct ModelInitSpec {
  std::string from;                                // from: a directory or s3://bucket/prefix
  ModelFormat format = ModelFormat::HuggingFace;   // format: huggingface (config.json + safetensors)
};

// spec.model: the transformer LM. Stage s holds layersOf(s) blocks (spec.model.layersPerStage
// each, or spec.pipeline.layersPerStage[s]); stage 0 also holds the embedding and the last stage
// the LM head. Fields that only one architecture has say so; left at their default they are
// accepted with either.
struct ModelSpec {
  Architecture architecture = Architecture::Gpt2;  // architecture: gpt2 | llama
  std::int64_t vocab_size = 256;       // vocabSize, 2..1000000
  std::int64_t hidden_size = 192;      // hiddenSize, 8..65536, a multiple of numHeads unless headDim
  std::int64_t num_heads = 6;          // numHeads, 1..256
  std::int64_t layers_per_stage = 2;   // layersPerStage, 1..256 (every stage; see spec.pipeline)
  std::int64_t sequence_length = 128;  // sequenceLength, 2..65536
  std::int64_t mlp_ratio = 4;          // mlpRatio, 1..16: MLP width = mlpRatio * hiddenSize
  bool shared_layers = false;          // sharedLayers: ALBERT-style, one block reused per stage (gpt2)
  std::int64_t intermediate_size = 0;  // intermediateSize, 0..1048576: the MLP width; 0 = mlpRatio * hiddenSize
  std::int64_t num_key_value_heads = 0;  // numKeyValueHeads, 0..256: grouped-query attention (llama),
                                         //   a divisor of numHeads; 0 = numHeads
  std::int64_t head_dim = 0;           // headDim, 0..1024: per-head width (llama, even); 0 = hiddenSize / numHeads
  double norm_eps = 1e-5;              // normEps, (0, 0.1]: LayerNorm's (gpt2) / RMSNorm's (llama) epsilon
  double rope_theta = 10000;           // ropeTheta, > 0: rotary base (llama)
  std::optional<RopeScalingSpec> rope_scaling;  // ropeScaling (llama)
  std::optional<bool> attention_bias;  // attentionBias: q/k/v/o biases; left out = gpt2 true, llama false
  std::optional<bool> mlp_bias;        // mlpBias: MLP biases; left out = gpt2 true, llama false
  std::optional<ModelInitSpec> init;   // init: {from, format} (llama)
};

// spec.pipeline
struct PipelineSpec {
  std::int64_t stages = 2;                     // stages, 2..64
  Compression compression = Compression::None;  // compression: none | fp16 | blockwise8
  std::int64_t block_size = 4096;              // blockSize: values per blockwise8 block, 16..65535
  // layersPerStage: the blocks of each stage, one count (1..256) per stage, for uneven stages (a
  // lighter first and last stage balance the embedding and the head). Empty: every stage holds
  // spec.model.layersPerStage, which must then be left at its default when this list is given.
  std::vector<std::int64_t> layers_per_stage;
  // recomputeActivations: a forward keeps only its stage input, not its graph, and the backward
  // runs the forward again (with the same parameters) before it; a stage's memory for the
  // microbatches in flight is then their inputs, at the cost of a second forward on every stage
  // but the last (which runs forward and backward at once and keeps nothing).
  bool recompute_activations = false;
};

// spec.averaging: how a stage's peers send the gradients they average.
struct AveragingSpec {
  Compression compression = Compression::None;  // compression: none | fp16 | blockwise8
  std::int64_t block_size = 4096;              // blockSize: values per blockwise8 block, 16..65535
  // maxHandoffLagSteps, 0..64: how many steps old a leaving peer's gradient may be when a peer that
  // stays takes it into its own step (a hand-off on a reclaim notice, under load, can find the stage
  // a few steps on). The only stale gradient a step applies; 0 takes only same-step hand-offs and
  // counts the others as lost samples.
  std::int64_t max_handoff_lag_steps = 4;
};

// spec.training.tokenizer: how text becomes token ids.
//   bytes          one token per byte
//   sentencepiece  a SentencePiece .model (`model`): the trainers encode text with it
//   huggingface    a Hugging Face tokenizer.json (`file`): its text is pre-tokenised by
//                  scripts/hf_tokenize.py into token files (the dataset must be token files);
//                  the job only checks each file's tokenizer hash and its vocabulary
enum class TokenizerKind { Bytes, SentencePiece, HuggingFace };
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::Bytes;  // kind: bytes | sentencepiece | huggingface
  std::string model;                          // model: the SentencePiece .model file (sentencepiece only)
  std::string file;                           // file: the tokenizer.json (huggingface only)
};

// spec.training.dataset.format: how its files are read.
//   auto    by file: a `swarm tokenize` file (its magic) as ids, *.jsonl / *.ndjson as JSON Lines,
//           anything else as text
//   text | jsonl | tokens   every file so
enum class DatasetFormat { Auto, Text, Jsonl, Tokens };

// spec.training.dataset
struct DatasetSpec {
  std::string path = "/usr/share/games/fortunes";  // path: a file or a directory of them
  DatasetFormat format = DatasetFormat::Auto;      // format: auto | text | jsonl | tokens
  std::string text_field = "text";                 // textField: the JSON Lines field holding the text
  double validation_fraction = 0.02;               // validationFraction, [0, 0.5]: held out for the
                                                   // eval loss (the tail of every file)
};

// spec.training.optimizer
struct OptimizerSpec {
  OptimizerKind name = OptimizerKind::AdamW;  // name: adamw | lamb
  double learning_rate = 0.002;               // learningRate, (0, 10]
  double beta1 = 0.9;                         // betas[0], [0, 1)
  double beta2 = 0.95;                        // betas[1], [0, 1)
  double epsilon = 1.0e-8;                    // epsilon, > 0
  double weight_decay = 0.01;                 // weightDecay, >= 0
  double grad_clip = 1.0;                     // gradClip, >= 0: per-stage norm clip, 0 disables
};

// spec.training.schedule
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::Cosine;  // kind: constant | linear | cosine
  std::int64_t warmup_steps = 10;            // warmupSteps, 0 .. maxSteps-1: linear warmup
  double min_learning_rate_ratio = 0.1;      // minLearningRateRatio, [0, 1]
};

// spec.training
struct TrainingSpec {
  std::int64_t global_batch = 64;  // globalBatch: samples per optimizer step and stage, over all
                                   // its peers; a multiple of microbatch
  std::int64_t microbatch = 8;     // microbatch, 1..65536
  std::int64_t max_steps = 300;    // maxSteps, >= 1
  std::int64_t eval_batches = 8;   // evalBatches, 0..65536: validation microbatches each trainer
                                   // evaluates at the end (the eval loss); 0 = no evaluation
  std::uint64_t seed = 1;          // seed
  TokenizerSpec tokenizer;         // tokenizer
  DatasetSpec dataset;             // dataset
  OptimizerSpec optimizer;         // optimizer
  ScheduleSpec schedule;           // schedule
};

// spec.workers: the peers serving the stages.
struct WorkersSpec {
  std::int64_t per_stage = 1;  // perStage, 1..1024
  std::string device = "auto";  // device: auto | cpu | cuda
  std::string precision = "auto";  // precision: auto | fp32 | bf16 | fp16; auto = bf16 on CUDA,
                                   // fp32 elsewhere (matmuls under autocast, weights stay fp32)
  std::int64_t threads = 0;    // threads, 0..1024: torch intra-op threads; 0 = cores / workers
};

// spec.trainers.routing: stochastic wiring, see planner/StageRouter.
struct RoutingSpec {
  double ema_alpha = 0.1;              // emaAlpha, (0, 1]: weight of the newest measurement
  double backward_weight = 2.0;        // backwardWeight, > 0: a backward counts this many forwards
  double explore_peer_seconds = 10.0;  // explorePeerSeconds, > 0: unmeasured peers tried this soon
  // interRegionPenaltyMs, 0..60000: what a pick of a peer outside the trainer's region costs more
  // than one at home (its measured round trips already hold the inter-region RTT); 0 = region-blind.
  double inter_region_penalty_ms = 200.0;
};

// spec.trainers
struct TrainersSpec {
  std::int64_t count = 1;                  // count, 1..1024
  std::int64_t inflight_microbatches = 4;  // inflightMicrobatches, 1..1024
  RoutingSpec routing;                     // routing
};

// spec.timeouts, all in seconds, each in (0, 86400].
struct TimeoutsSpec {
  double connect_seconds = 3;           // connectSeconds: TCP connect to a peer
  double forward_seconds = 30;          // forwardSeconds: one forward request, queueing included
  double backward_seconds = 60;         // backwardSeconds: one backward request, queueing included
  double averaging_seconds = 30;        // averagingSeconds: gather + all-reduce of one step
  double heartbeat_seconds = 1;         // heartbeatSeconds: peers re-announce this often
  double peer_expiry_seconds = 4;       // peerExpirySeconds, > heartbeatSeconds: drop silent peers
  double activation_ttl_seconds = 120;  // activationTtlSeconds: keep activations for the backward
};

// spec.secret: the shared secret that authenticates data-plane frames (HMAC).
//
// Processes always read the secret from the environment variable named by `env`
// (resolve_secret). `secretRef` names a Kubernetes Secret; the operator resolves it by injecting
// that Secret's key into the pods as the variable `env` (a secretKeyRef), so no process ever
// reads Kubernetes Secrets itself. With `swarm local`, export the variable yourself.
//   secret: {env: MY_SECRET}
//   secret: {secretRef: {name: my-secret, key: token}}          (env stays SWARM_JOB_SECRET)
struct SecretSpec {
  std::string env = "SWARM_JOB_SECRET";  // env: an environment variable name
  std::string secret_ref_name;           // secretRef.name: a Kubernetes Secret; empty = none
  std::string secret_ref_key;            // secretRef.key: the key inside it
};

// The whole SwarmJob document.
// spec.rebalancing: adaptive rebalancing (planner/rebalance.h). Every periodSeconds, the
// least-loaded peer of the least-loaded stage moves to the most-loaded stage when that raises the
// pipeline's bottleneck throughput by at least minGain; a peer that moved stays put for
// cooldownSeconds; no stage drops below minPeersPerStage.
struct RebalancingSpec {
  bool enabled = true;               // enabled
  double period_seconds = 30;        // periodSeconds, (0, 86400]
  std::int64_t min_peers_per_stage = 1;  // minPeersPerStage, 1..1024
  double min_gain = 0.25;            // minGain, [0, 10]: hysteresis against flapping
  double cooldown_seconds = 60;      // cooldownSeconds, [0, 86400]
};

// spec.checkpoint: each stage writes parameters, optimizer state and step every everySteps steps
// (atomically: a crash mid-write never corrupts the last good checkpoint). A stage left with no
// live peer is restored from its latest checkpoint by the next peer assigned to it.
//
// path s3://BUCKET[/PREFIX] keeps them in object storage instead (S3, MinIO, GCS's S3 interface,
// R2; worker/storage/s3_client.h): each checkpoint is uploaded (multipart above partSizeMiB), then a
// manifest is written last, so a half-uploaded checkpoint is never listed or restored. The
// credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional
// AWS_SESSION_TOKEN); on Kubernetes the operator sets them in every pod from the Secret that
// spec.checkpoint.s3.credentialsSecret names (Kubernetes-only).
struct CheckpointS3Spec {
  std::string endpoint;              // endpoint: http(s)://host[:port]; "" = $AWS_ENDPOINT_URL_S3,
                                     //   $AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com
  std::string region;                // region: "" = $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1
  std::optional<bool> path_style;    // pathStyle: left out = true when an endpoint is set (MinIO)
  std::int64_t part_size_mib = 16;   // partSizeMiB, 5..5120: multipart upload part size
};

struct CheckpointSpec {
  std::string path;                 // path: a directory shared by the stage's peers, or
                                    //   s3://bucket[/prefix]; "" = off
  std::int64_t every_steps = 50;    // everySteps, >= 1
  std::int64_t keep = 2;            // keep, >= 1: checkpoints kept per stage
  CheckpointS3Spec s3;              // s3: object storage settings (with an s3:// path)
};

// spec.security. transport left out: "authenticated" under `swarm local` (one machine); the
// operator picks "encrypted" when the job's nodePools span more than one region, "authenticated"
// otherwise, and writes its choice into the spec the pods read (resolved_transport).
//   security: {transport: encrypted}
struct SecuritySpec {
  std::optional<Transport> transport;  // transport: authenticated | encrypted
};

struct JobSpec {
  std::string api_version = kSwarmJobApiVersion;  // apiVersion
  std::string kind = kSwarmJobKind;               // kind
  std::string name = "tiny-lm";                   // metadata.name: DNS-1123 label, <= 40 chars
  std::string namespace_ = "default";             // metadata.namespace: DNS-1123 label
  ModelSpec model;                                // spec.model
  PipelineSpec pipeline;                          // spec.pipeline
  AveragingSpec averaging;                        // spec.averaging
  TrainingSpec training;                          // spec.training
  WorkersSpec workers;                            // spec.workers
  TrainersSpec trainers;                          // spec.trainers
  TimeoutsSpec timeouts;                          // spec.timeouts
  SecretSpec secret;                              // spec.secret
  RebalancingSpec rebalancing;                    // spec.rebalancing
  CheckpointSpec checkpoint;                      // spec.checkpoint
  SecuritySpec security;                          // spec.security
  // The Kubernetes-only fields the manifest set (spec.nodePools, spec.placement,
  // spec.workers.image/resources/minPerStage/maxPerStage, spec.trainers.image/resources,
  // spec.checkpoint.volumeClaimName, spec.checkpoint.s3.credentialsSecret), as paths.
  // The operator reads them (operator/api/swarmjob.h); everything else ignores them, and `swarm
  // local` says so. Not part of equality or of to_json.
  std::vector<std::string> cluster_only_fields;
};

// The blocks of each stage: spec.pipeline.layersPerStage, or spec.model.layersPerStage for each of
// spec.pipeline.stages stages.
std::vector<std::int64_t> stage_layers(const JobSpec& spec);

// Every problem found in a spec. errors() holds one message per problem, each starting with the
// field path; what() lists them one per line, each prefixed with "<source>: " when the spec came
// from a file.
class SpecError : public std::runtime_error {
 public:
  explicit SpecError(std::vector<std::string> errors, std::string source = {});
  explicit SpecError(const std::string& error) : SpecError(std::vector<std::string>{error}) {}

  const std::vector<std::string>& errors() const noexcept { return errors_; }
  // The file the spec was read from; empty for parse_job_spec / job_spec_from_json.
  const std::string& source() const noexcept { return source_; }

 private:
  std::vector<std::string> errors_;
  std::string source_;
};

// Parses and validates a SwarmJob manifest from YAML text (JSON text is valid YAML and works too).
// Fields left out take the defaults above. Throws SpecError listing every problem.
JobSpec parse_job_spec(const std::string& yaml_text);

// Reads `path` and parses it like parse_job_spec. Throws SpecError (whose source() is `path`) on
// an unreadable file or an invalid spec.
JobSpec load_job_spec(const std::string& path);

// Checks every rule on an already-built spec (e.g. after command-line overrides); returns one
// message per broken rule, empty when valid. parse_job_spec and job_spec_from_json apply the same
// rules.
std::vector<std::string> validate_job_spec(const JobSpec& spec);
// Throws SpecError when validate_job_spec finds anything.
void check_job_spec(const JobSpec& spec);

// The data-plane secret: the value of the environment variable spec.env. Throws SpecError
// "spec.secret.env: environment variable X is not set or empty" when it is missing. A secretRef is
// delivered in that same variable by the operator (see SecretSpec).
std::string resolve_secret(const SecretSpec& secret);
// The previous secret during a rotation: the variable <spec.env>_PREVIOUS, or "" when unset. Only
// checkpoints are opened with it (docs/security.md, "Rotating a job's secret").
std::string resolve_previous_secret(const SecretSpec& secret);

// The YAML/JSON spellings of the enums, and back (nullopt for an unknown spelling).
const char* to_string(Compression c);
const char* to_string(OptimizerKind k);
const char* to_string(Transport t);
const char* to_string(ScheduleKind k);
const char* to_string(TokenizerKind k);
const char* to_string(DatasetFormat f);
const char* to_string(Architecture a);
const char* to_string(RopeScalingType t);
const char* to_string(ModelFormat f);
std::optional<Compression> parse_compression(std::string_view s);
std::optional<OptimizerKind> parse_optimizer_kind(std::string_view s);
std::optional<Transport> parse_transport(std::string_view s);
std::optional<ScheduleKind> parse_schedule_kind(std::string_view s);
std::optional<TokenizerKind> parse_tokenizer_kind(std::string_view s);
std::optional<DatasetFormat> parse_dataset_format(std::string_view s);
std::optional<Architecture> parse_architecture(std::string_view s);
std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view s);
std::optional<ModelFormat> parse_model_format(std::string_view s);

// Kubernetes name rules. A DNS-1123 label: 1..63 of [a-z0-9-], starting and ending with [a-z0-9].
// A DNS-1123 subdomain: 1..253 chars, dot-separated labels.
bool is_dns1123_label(std::string_view s);
bool is_dns1123_subdomain(std::string_view s);

// Member-wise equality.
bool operator==(const RopeScalingSpec& a, const RopeScalingSpec& b);
bool operator==(const ModelInitSpec& a, const ModelInitSpec& b);
bool operator==(const ModelSpec& a, const ModelSpec& b);
bool operator==(const PipelineSpec& a, const PipelineSpec& b);
bool operator==(const AveragingSpec& a, const AveragingSpec& b);
bool operator==(const TokenizerSpec& a, const TokenizerSpec& b);
bool operator==(const DatasetSpec& a, const DatasetSpec& b);
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b);
bool operator==(const ScheduleSpec& a, const ScheduleSpec& b);
bool operator==(const TrainingSpec& a, const TrainingSpec& b);
bool operator==(const WorkersSpec& a, const WorkersSpec& b);
bool operator==(const RoutingSpec& a, const RoutingSpec& b);
bool operator==(const SecuritySpec& a, const SecuritySpec& b);
bool operator==(const TrainersSpec& a, const TrainersSpec& b);
bool operator==(const TimeoutsSpec& a, const TimeoutsSpec& b);
bool operator==(const SecretSpec& a, const SecretSpec& b);
bool operator==(const RebalancingSpec& a, const RebalancingSpec& b);
bool operator==(const CheckpointS3Spec& a, const CheckpointS3Spec& b);
bool operator==(const CheckpointSpec& a, const CheckpointSpec& b);
bool operator==(const JobSpec& a, const JobSpec& b);
inline bool operator!=(const RopeScalingSpec& a, const RopeScalingSpec& b) { return !(a == b); }
inline bool operator!=(const ModelInitSpec& a, const ModelInitSpec& b) { return !(a == b); }
inline bool operator!=(const ModelSpec& a, const ModelSpec& b) { return !(a == b); }
inline bool operator!=(const PipelineSpec& a, const PipelineSpec& b) { return !(a == b); }
inline bool operator!=(const DatasetSpec& a, const DatasetSpec& b) { return !(a == b); }
inline bool operator!=(const OptimizerSpec& a, const OptimizerSpec& b) { return !(a == b); }
inline bool operator!=(const ScheduleSpec& a, const ScheduleSpec& b) { return !(a == b); }
inline bool operator!=(const TrainingSpec& a, const TrainingSpec& b) { return !(a == b); }
inline bool operator!=(const WorkersSpec& a, const WorkersSpec& b) { return !(a == b); }
inline bool operator!=(const RoutingSpec& a, const RoutingSpec& b) { return !(a == b); }
inline bool operator!=(const TrainersSpec& a, const TrainersSpec& b) { return !(a == b); }
inline bool operator!=(const TimeoutsSpec& a, const TimeoutsSpec& b) { return !(a == b); }
inline bool operator!=(const SecretSpec& a, const SecretSpec& b) { return !(a == b); }
inline bool operator!=(const RebalancingSpec& a, const RebalancingSpec& b) { return !(a == b); }
inline bool operator!=(const CheckpointS3Spec& a, const CheckpointS3Spec& b) { return !(a == b); }
inline bool operator!=(const CheckpointSpec& a, const CheckpointSpec& b) { return !(a == b); }
inline bool operator!=(const JobSpec& a, const JobSpec& b) { return !(a == b); }

}  // namespace swarm
