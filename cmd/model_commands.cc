#include "cmd/model_commands.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "common/job_spec.h"
#include "common/s3_url.h"
#include "worker/data/text_dataset.h"
#include "worker/data/tokenizer.h"
#include "worker/checkpoint/export.h"
#include "worker/checkpoint/hf_export.h"
#include "worker/runtime/job_model.h"
#include "worker/checkpoint/hf_init.h"

namespace swarm::cli {
namespace {

// --model: an existing file or folder, or an s3:// URL (read with the AWS_* variables' settings).
const CLI::Validator file_or_s3_url(
    [](std::string& v) -> std::string {
      if (is_s3_url(v)) return s3_url_problem(v).value_or("");
      return CLI::ExistingPath(v);
    },
    "FILE|DIR|s3://BUCKET/KEY");

// A file swarm export wrote, or a Hugging Face checkpoint folder (config.json beside safetensors;
// locally a folder, in object storage a prefix not ending in .safetensors).
runtime::ExportedModel load_model(const std::string& model, int64_t sequence_length) {
  const bool folder = is_s3_url(model) ? model.size() < 12 || model.compare(model.size() - 12, 12, ".safetensors") != 0
                                       : std::filesystem::is_directory(model);
  return folder ? runtime::load_hf_model(model, sequence_length) : runtime::load_exported(model);
}

constexpr const char* kModelHelp =
    "a safetensors file written by swarm export, a Hugging Face checkpoint folder (config.json and "
    "safetensors: the model before fine-tuning), or either in object storage (s3://)";
constexpr const char* kSequenceHelp =
    "a Hugging Face checkpoint's window in tokens (default: 256, at most its max_position_embeddings)";

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s) || s.empty()) throw std::invalid_argument("--secret-file " + path + ": cannot read a secret");
  return s;
}

// The exported model's tokenizer (its config's), or the SentencePiece model given instead.
data::Tokenizer tokenizer_of(const runtime::ExportedModel& m, const std::string& override_model) {
  if (!override_model.empty()) return data::Tokenizer::sentencepiece(override_model);
  const auto t = m.config_json.value("tokenizer", nlohmann::json::object());
  const std::string kind = t.value("kind", "bytes");
  if (kind == "sentencepiece") return data::Tokenizer::sentencepiece(t.value("model", ""));
  if (kind == "huggingface") return data::Tokenizer::huggingface(t.value("file", ""));
  return data::Tokenizer::bytes();
}

// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD (a byte-level model
// writes such bytes; a terminal shows them as noise).
std::string printable_utf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && !(n == 2 && c < 0xc2);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && (c >= 0x20 || c == '\n' || c == '\t')) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// --prompt-ids "1,2,3": each an id below the vocabulary.
std::vector<uint32_t> parse_ids(const std::string& list, int64_t vocab) {
  std::vector<uint32_t> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, end - at);
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || id < 0 || id >= vocab)
      throw std::invalid_argument("--prompt-ids: \"" + item + "\" is not a token id below the vocabulary (" +
                                  std::to_string(vocab) + ")");
    out.push_back(static_cast<uint32_t>(id));
    at = end + 1;
  }
  return out;
}

}  // namespace

void ExportCommand::add_to(CLI::App& app) {
  cmd = app.add_subcommand("export", "gather the newest step every stage checkpointed into one safetensors file");
  cmd->add_option("--job", job, "the SwarmJob manifest (model shape, checkpoint path, secret variable)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--from", from,
                  "the checkpoint directory or s3://bucket/prefix (default: the job's spec.checkpoint.path; "
                  "object storage settings from spec.checkpoint.s3 and the AWS_* variables)");
  cmd->add_option("--out", out, "the safetensors file (or s3:// object) to write; config.json goes beside it")
      ->required();
  cmd->add_option("--secret-file", secret_file,
                  "read the job secret from this file (swarm local keeps it in LOG_DIR/job-secret) instead of the "
                  "variable spec.secret.env names");
  cmd->add_flag("--initial", initial, "export the job's initial parameters (step 0, no checkpoints): the \"before\"");
  cmd->add_option("--format", format,
                  "swarm (one safetensors file, the swarm's names) or huggingface (--out is a folder: a "
                  "LlamaForCausalLM checkpoint that transformers loads)")
      ->check(CLI::IsMember({"swarm", "huggingface"}));
  cmd->add_option("--max-shard-size", max_shard_size,
                  "huggingface: the most bytes per safetensors file; above it, shards and an index (5GB, 20KB, ...)");
}

namespace {

int export_huggingface(const ExportCommand& c, const JobSpec& spec, const runtime::CheckpointLocation& where,
                       const std::string& secret) {
  const uint64_t max_shard = runtime::parse_byte_size(c.max_shard_size, "--max-shard-size");
  if (auto why = runtime::hf_export_refusal(runtime::model_config(spec))) throw std::invalid_argument(*why);
  int64_t step = 0;
  const auto stages = c.initial ? runtime::initial_stages(spec)
                                : runtime::load_checkpointed_stages(spec, where, secret, &step);
  const auto r = runtime::export_hf(spec, stages, step, c.out, max_shard);
  std::string files;
  for (const auto& f : r.files) files += (files.empty() ? "" : ", ") + f;
  std::printf("exported step %lld as a Hugging Face checkpoint: %zu tensors, %.1f MB -> %s (%s)\n",
              static_cast<long long>(step), r.tensors, static_cast<double>(r.bytes) / 1e6, r.dir.c_str(),
              files.c_str());
  return 0;
}

}  // namespace

int ExportCommand::run() const {
  const JobSpec spec = load_job_spec(job);
  if (format == "huggingface" && initial) return export_huggingface(*this, spec, runtime::CheckpointLocation(""), "");
  if (initial) {
    const auto r = runtime::export_initial(spec, out);
    std::printf("exported the initial parameters (step 0): %zu tensors, %.1f MB -> %s\n", r.tensors,
                static_cast<double>(r.bytes) / 1e6, r.model_path.c_str());
    return 0;
  }
  runtime::CheckpointLocation where(spec.checkpoint);
  if (!from.empty()) where.path = from;
  if (where.path.empty()) throw std::invalid_argument("--from: the job has no spec.checkpoint.path; name the directory");
  if (auto why = is_s3_url(where.path) ? s3_url_problem(where.path) : std::nullopt)
    throw std::invalid_argument("--from: " + *why);
  if (auto why = is_s3_url(out) ? s3_url_problem(out) : std::nullopt) throw std::invalid_argument("--out: " + *why);
  const std::string secret = secret_file.empty() ? resolve_secret(spec.secret) : read_secret_file(secret_file);
  if (format == "huggingface") return export_huggingface(*this, spec, where, secret);
  const auto r = runtime::export_model(spec, where, secret, out);
  std::printf("exported step %lld: %zu tensors, %.1f MB -> %s (config: %s)\n", static_cast<long long>(r.step),
              r.tensors, static_cast<double>(r.bytes) / 1e6, r.model_path.c_str(), r.config_path.c_str());
  return 0;
}

void EvalCommand::add_to(CLI::App& app) {
  cmd = app.add_subcommand("eval", "loss and perplexity of an exported model on data");
  cmd->add_option("--model", model, kModelHelp)->required()->check(file_or_s3_url);
  cmd->add_option("--sequence-length", sequence_length, kSequenceHelp)->check(CLI::Range(2, 65536));
  cmd->add_option("--data", data, "text, JSON Lines or token files, or a directory (as spec.training.dataset)")
      ->required()->check(CLI::ExistingPath);
  cmd->add_option("--batches", batches, "batches of consecutive windows from the start of the data")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--batch", batch, "windows per batch")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--tokenizer-model", tokenizer_model, "a SentencePiece model instead of the one in the config");
}

int EvalCommand::run() const {
  const auto m = load_model(model, sequence_length);
  const auto tok = tokenizer_of(m, tokenizer_model);
  data::DatasetOptions o;
  o.validation_fraction = 0;
  const auto ds = data::TextDataset::load(data, o, &tok);
  const data::BatchSampler sampler(ds, m.config.sequence_length, 0);
  const int64_t windows = sampler.training_windows();
  if (windows == 0) throw std::invalid_argument("--data " + data + ": shorter than one sequence");
  const int64_t n = std::min(batches, std::max<int64_t>(1, windows / batch));
  std::vector<int64_t> in, tg;
  double total = 0;
  const int64_t T = m.config.sequence_length, B = std::min(batch, windows);
  for (int64_t i = 0; i < n; ++i) {
    sampler.training_batch_at(B, i, in, tg);
    total += m.loss(torch::from_blob(in.data(), {B, T}, torch::kInt64), torch::from_blob(tg.data(), {B, T}, torch::kInt64));
  }
  const double loss = total / static_cast<double>(n);
  std::printf("step %lld: loss %.4f, perplexity %.2f over %lld batches of %lld x %lld tokens\n",
              static_cast<long long>(m.step), loss, std::exp(loss), static_cast<long long>(n),
              static_cast<long long>(B), static_cast<long long>(T));
  return 0;
}

void GenerateCommand::add_to(CLI::App& app) {
  cmd = app.add_subcommand("generate", "continue a prompt with an exported model");
  cmd->add_option("--model", model, kModelHelp)->required()->check(file_or_s3_url);
  cmd->add_option("--sequence-length", sequence_length, kSequenceHelp)->check(CLI::Range(2, 65536));
  auto* text = cmd->add_option("--prompt", prompt, "the text to continue");
  auto* ids = cmd->add_option("--prompt-ids", prompt_ids,
                              "the prompt as comma-separated token ids instead: for a huggingface tokenizer, whose text "
                              "the swarm does not encode (scripts/hf_tokenize.py --encode TEXT prints them)");
  text->excludes(ids);
  cmd->add_option("--max-tokens", max_tokens, "tokens to add")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", temperature, "0 = always the most likely token")
      ->capture_default_str()->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", top_k, "sample among the k most likely tokens; 0 = all")
      ->capture_default_str()->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--seed", seed, "the sampling seed")->capture_default_str();
  cmd->add_option("--tokenizer-model", tokenizer_model, "a SentencePiece model instead of the one in the config");
}

int GenerateCommand::run() const {
  torch::NoGradGuard no_grad;
  if (prompt.empty() && prompt_ids.empty()) throw std::invalid_argument("generate: give --prompt TEXT or --prompt-ids IDS");
  const auto m = load_model(model, sequence_length);
  const auto tok = tokenizer_of(m, tokenizer_model);
  std::vector<uint32_t> ids = prompt_ids.empty() ? tok.encode(prompt) : parse_ids(prompt_ids, tok.vocab_size());
  if (ids.empty()) throw std::invalid_argument("--prompt: encodes to no token");
  const std::string shown = prompt_ids.empty() ? prompt : printable_utf8(tok.decode(ids));
  const size_t prompt_tokens = ids.size();
  auto gen = at::detail::createCPUGenerator(seed);
  for (int64_t i = 0; i < max_tokens; ++i) {
    const size_t from = ids.size() > static_cast<size_t>(m.config.sequence_length)
                            ? ids.size() - static_cast<size_t>(m.config.sequence_length)
                            : 0;
    std::vector<int64_t> window(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
    const auto x = torch::from_blob(window.data(), {1, static_cast<int64_t>(window.size())}, torch::kInt64);
    auto logits = m.logits(x)[0][-1].to(torch::kDouble);
    int64_t next;
    if (temperature == 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / temperature;
      if (top_k > 0 && top_k < logits.size(0)) {
        const auto kth = std::get<0>(logits.topk(top_k)).min();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, 0), 1, false, gen).item<int64_t>();
    }
    ids.push_back(static_cast<uint32_t>(next));
  }
  std::vector<uint32_t> continuation(ids.begin() + static_cast<std::ptrdiff_t>(prompt_tokens), ids.end());
  std::cout << shown << printable_utf8(tok.decode(continuation)) << std::endl;
  return 0;
}

}  // namespace swarm::cli
