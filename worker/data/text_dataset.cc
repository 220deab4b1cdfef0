#include "worker/data/text_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>

#include "worker/data/token_file.h"
#include "worker/data/tokenizer.h"

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

constexpr size_t kSniffBytes = 8192;  // a NUL byte in this prefix marks a binary file

struct Candidate {
  fs::path path;
  bool symlink = false;
};

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// fortune's strfile index: `X.dat` next to the text file `X`.
bool strfile_index(const fs::path& p) {
  if (p.extension() != ".dat") return false;
  fs::path text = p;
  text.replace_extension();
  std::error_code ec;
  return fs::is_regular_file(text, ec);
}

// Reads `p`; returns false (and leaves `out` unspecified) for a binary file.
bool read_text(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw DatasetError("dataset: cannot open " + p.string() + ": " + std::strerror(errno));
  out.clear();
  out.resize(kSniffBytes);
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.find('\0') != std::string::npos) return false;
  if (in) {
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out += rest;
  }
  if (in.bad()) throw DatasetError("dataset: error reading " + p.string());
  return true;
}

std::vector<Candidate> walk(const fs::path& root) {
  std::vector<Candidate> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw DatasetError("dataset: cannot list " + root.string() + ": " + ec.message());
  const fs::recursive_directory_iterator end;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::error_code sec;
    const fs::file_status own = it->symlink_status(sec);
    if (hidden(p)) {
      if (fs::is_directory(own)) it.disable_recursion_pending();
      continue;
    }
    if (fs::is_symlink(own)) {
      if (fs::is_regular_file(fs::status(p, sec))) out.push_back({p, true});  // broken: skipped
    } else if (fs::is_regular_file(own)) {
      out.push_back({p, false});
    }
  }
  if (ec) throw DatasetError("dataset: cannot list under " + root.string() + ": " + ec.message());
  return out;
}

// One file per canonical path: real files win over symlinks, then the smaller path.
std::vector<fs::path> dedupe(std::vector<Candidate> candidates) {
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.symlink != b.symlink) return !a.symlink;
    return a.path < b.path;
  });
  std::map<fs::path, fs::path> by_canonical;
  for (const auto& c : candidates) {
    std::error_code ec;
    const fs::path canon = fs::canonical(c.path, ec);
    by_canonical.emplace(ec ? c.path : canon, c.path);
  }
  std::vector<fs::path> out;
  out.reserve(by_canonical.size());
  for (const auto& kv : by_canonical) out.push_back(kv.second);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TextDataset TextDataset::load(const std::string& path, double validation_fraction, const Tokenizer* tokenizer) {
  if (path.empty()) throw DatasetError("dataset: empty path");
  if (!(validation_fraction >= 0 && validation_fraction < 1)) {
    throw DatasetError("dataset " + path + ": validation fraction " +
                       std::to_string(validation_fraction) + " is not in [0, 1)");
  }
  const fs::path root(path);
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (!fs::exists(st)) throw DatasetError("dataset path does not exist: " + path);

  if (fs::is_regular_file(st) && is_token_file(path)) return load_token_file(path, validation_fraction, tokenizer);
  std::vector<fs::path> paths;
  bool single_file = false;
  if (fs::is_regular_file(st)) {
    paths.push_back(root);
    single_file = true;
  } else if (fs::is_directory(st)) {
    paths = dedupe(walk(root));
  } else {
    throw DatasetError("dataset path is neither a file nor a directory: " + path);
  }

  auto data = std::make_shared<Data>();
  data->path = path;
  data->tokenized = tokenizer != nullptr && tokenizer->kind() != TokenizerKind::Bytes;
  std::vector<std::string> texts;
  std::string text;
  for (const auto& p : paths) {
    if (!single_file && strfile_index(p)) continue;
    if (!read_text(p, text)) {
      if (single_file) throw DatasetError("dataset file is binary, not text: " + path);
      continue;
    }
    if (text.empty()) continue;
    data->files.push_back(p.string());
    texts.push_back(std::move(text));
  }
  if (texts.empty()) throw DatasetError("dataset " + path + ": no text files found");

  // The tail of every file is validation; cumulative rounding keeps the total at
  // floor(total * fraction) even when files are small.
  size_t before = 0;
  size_t total = 0;
  for (const auto& t : texts) total += t.size();
  data->train.reserve(total);
  data->validation.reserve(static_cast<size_t>(static_cast<double>(total) * validation_fraction) +
                           1);
  for (const auto& t : texts) {
    const auto cut = [&](size_t n) {
      return static_cast<size_t>(std::floor(static_cast<double>(n) * validation_fraction));
    };
    const size_t val = std::min(t.size(), cut(before + t.size()) - cut(before));
    before += t.size();
    data->train.append(t, 0, t.size() - val);
    data->validation.append(t, t.size() - val, val);
    if (data->tokenized) {
      tokenizer->encode(std::string_view(t).substr(0, t.size() - val), data->train_ids);
      tokenizer->encode(std::string_view(t).substr(t.size() - val), data->validation_ids);
    }
  }
  return TextDataset(std::move(data));
}

// A pre-tokenized corpus (`swarm tokenize`): its last `validation_fraction` of ids is validation.
// It must have been written with the job's tokenizer (the same vocabulary).
TextDataset TextDataset::load_token_file(const std::string& path, double validation_fraction,
                                         const Tokenizer* tokenizer) {
  TokenFile f = read_token_file(path);
  const int64_t want = tokenizer ? tokenizer->vocab_size() : 256;
  if (static_cast<int64_t>(f.vocab_size) != want)
    throw DatasetError("dataset " + path + ": written with a vocabulary of " + std::to_string(f.vocab_size) +
                       ", but spec.training.tokenizer (" + (tokenizer ? tokenizer->describe() : "bytes") + ") has " +
                       std::to_string(want));
  auto data = std::make_shared<Data>();
  data->path = path;
  data->files = {path};
  data->tokenized = true;
  const auto val = static_cast<size_t>(std::floor(static_cast<double>(f.ids.size()) * validation_fraction));
  data->validation_ids.assign(f.ids.end() - static_cast<std::ptrdiff_t>(val), f.ids.end());
  f.ids.resize(f.ids.size() - val);
  data->train_ids = std::move(f.ids);
  return TextDataset(std::move(data));
}

size_t TextDataset::train_bytes() const { return data_->train.size(); }
size_t TextDataset::validation_bytes() const { return data_->validation.size(); }
std::vector<std::string> TextDataset::files() const { return data_->files; }
const std::string& TextDataset::path() const { return data_->path; }
std::string_view TextDataset::train() const { return data_->train; }
std::string_view TextDataset::validation() const { return data_->validation; }
size_t TextDataset::train_tokens() const { return data_->train_tokens(); }
size_t TextDataset::validation_tokens() const { return data_->validation_tokens(); }

BatchSampler::BatchSampler(const TextDataset& dataset, int64_t sequence_length, uint64_t seed,
                           int stream)
    : data_(dataset.data_), sequence_length_(sequence_length) {
  if (sequence_length < 1) {
    throw std::invalid_argument("BatchSampler: sequence_length must be >= 1");
  }
  const auto need = static_cast<uint64_t>(sequence_length) + 1;
  if (dataset.train_tokens() < need) {
    throw DatasetError("dataset " + data_->path + ": training split has " + std::to_string(dataset.train_tokens()) +
                       " tokens, fewer than one sequence (" + std::to_string(need) + " tokens)");
  }
  // std::seed_seq and mt19937_64 are fully specified by the standard: same stream everywhere.
  const auto s = static_cast<uint32_t>(stream);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), s,
                    0x53574152u /* 'SWAR' */};
  rng_.seed(seq);
}

uint64_t BatchSampler::below(uint64_t n) {
  // Rejection sampling: unbiased, and unlike std::uniform_int_distribution identical across
  // standard libraries.
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
  for (;;) {
    const uint64_t x = rng_();
    if (x >= threshold) return x % n;
  }
}

namespace {

template <class Token>
void fill(const Token* tokens, int64_t start, int64_t t, int64_t row, std::vector<int64_t>& in,
          std::vector<int64_t>& tg) {
  const Token* b = tokens + start;
  int64_t* ip = in.data() + row * t;
  int64_t* tp = tg.data() + row * t;
  for (int64_t j = 0; j < t; ++j) {
    ip[j] = b[j];
    tp[j] = b[j + 1];
  }
}

// The window of `t` + 1 tokens at `start` of the training or validation split.
void fill_from(const std::string& bytes, const std::vector<uint32_t>& ids, bool tokenized, int64_t start, int64_t t,
               int64_t row, std::vector<int64_t>& in, std::vector<int64_t>& tg) {
  if (tokenized) {
    fill(ids.data(), start, t, row, in, tg);
  } else {
    fill(reinterpret_cast<const unsigned char*>(bytes.data()), start, t, row, in, tg);
  }
}

void check_batch(int64_t batch) {
  if (batch < 1) throw std::invalid_argument("BatchSampler: batch must be >= 1");
}

}  // namespace

void BatchSampler::next(int64_t batch, std::vector<int64_t>& inputs,
                        std::vector<int64_t>& targets) {
  check_batch(batch);
  const int64_t t = sequence_length_;
  inputs.resize(static_cast<size_t>(batch * t));
  targets.resize(static_cast<size_t>(batch * t));
  const uint64_t starts = data_->train_tokens() - static_cast<uint64_t>(t);  // >= 1
  for (int64_t r = 0; r < batch; ++r) {
    fill_from(data_->train, data_->train_ids, data_->tokenized, static_cast<int64_t>(below(starts)), t, r, inputs,
              targets);
  }
}

int64_t BatchSampler::validation_windows() const {
  const auto n = static_cast<int64_t>(data_->validation_tokens());
  return n < sequence_length_ + 1 ? 0 : (n - 1) / sequence_length_;
}

void BatchSampler::validation_batch(int64_t batch, int64_t index, std::vector<int64_t>& inputs,
                                    std::vector<int64_t>& targets) const {
  check_batch(batch);
  if (index < 0) throw std::invalid_argument("BatchSampler: validation index must be >= 0");
  const int64_t windows = validation_windows();
  const int64_t t = sequence_length_;
  if (windows == 0) {
    throw DatasetError("dataset " + data_->path + ": validation split has " +
                       std::to_string(data_->validation_tokens()) +
                       " tokens, fewer than one sequence (" + std::to_string(t + 1) + " tokens)");
  }
  inputs.resize(static_cast<size_t>(batch * t));
  targets.resize(static_cast<size_t>(batch * t));
  const int64_t first = (index % windows) * (batch % windows) % windows;
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t w = (first + r) % windows;
    fill_from(data_->validation, data_->validation_ids, data_->tokenized, w * t, t, r, inputs, targets);
  }
}

}  // namespace swarm::data
