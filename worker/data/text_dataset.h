// Text data for the trainers: bytes (vocabulary 256: one token per byte), or the ids of a
// tokenizer (tokenizer.h: SentencePiece), taken from the same text.
//
// TextDataset::load() reads a text file, or every text file under a directory (recursively), into
// memory and splits it into a training and a validation part (the last `validation_fraction` of
// each file's bytes is validation). BatchSampler draws random training windows, deterministically
// for a (seed, stream) pair, and fixed validation windows.
//
// What load() reads under a directory: regular files and symlinks to regular files, sorted by path;
// a file reached twice (a symlink to a file already read, e.g. fortune's `*.u8`) is read once;
// hidden entries (name starting with '.') are skipped, hidden directories are not entered;
// binary files are skipped: a NUL byte in the first 8 KiB, or a strfile index (`X.dat` next to `X`,
// as in /usr/share/games/fortunes); empty files are skipped; symlinked directories are not followed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace swarm::data {

// Every dataset problem; the message names the path concerned.
class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer;

class TextDataset {
 public:
  // Throws DatasetError: missing path, no text files found, unreadable file, bad fraction.
  // A single file written by `swarm tokenize` (token_file.h) is read as ids (its vocabulary must be
  // the tokenizer's; bytes when `tokenizer` is null). With a SentencePiece `tokenizer`, each file's training and validation parts are encoded
  // separately, and the samplers draw windows of token ids; bytes (or none) samples the bytes.
  static TextDataset load(const std::string& path, double validation_fraction = 0.02,
                          const Tokenizer* tokenizer = nullptr);

  size_t train_bytes() const;
  size_t validation_bytes() const;
  std::vector<std::string> files() const;  // the files read, in the order they were concatenated
  const std::string& path() const;         // as given to load()
  std::string_view train() const;
  std::string_view validation() const;
  // Tokens the samplers draw from: the bytes, or the tokenizer's ids.
  size_t train_tokens() const;
  size_t validation_tokens() const;

  static constexpr int64_t kVocabSize = 256;

 private:
  friend class BatchSampler;
  struct Data {
    std::string path;
    std::vector<std::string> files;
    std::string train;
    std::string validation;
    bool tokenized = false;  // the samplers read train_ids / validation_ids, not the bytes
    std::vector<uint32_t> train_ids;
    std::vector<uint32_t> validation_ids;
    // The tokens the samplers draw from in each split: ids when tokenized, else bytes.
    size_t train_tokens() const { return tokenized ? train_ids.size() : train.size(); }
    size_t validation_tokens() const { return tokenized ? validation_ids.size() : validation.size(); }
  };
  explicit TextDataset(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  static TextDataset load_token_file(const std::string& path, double validation_fraction, const Tokenizer* tokenizer);
  std::shared_ptr<const Data> data_;  // shared with samplers: cheap copies, no dangling
};

// Not thread-safe; use one sampler per thread (different streams for different data).
class BatchSampler {
 public:
  // Throws DatasetError (naming the path) if the training split is shorter than one sequence
  // (sequence_length + 1 bytes); std::invalid_argument if sequence_length < 1.
  BatchSampler(const TextDataset& dataset, int64_t sequence_length, uint64_t seed, int stream = 0);

  // `batch` random training windows: inputs = bytes[i, i+T), targets = bytes[i+1, i+T+1),
  // row-major [batch, T]. The sequence of batches depends only on (seed, stream) and the data.
  void next(int64_t batch, std::vector<int64_t>& inputs, std::vector<int64_t>& targets);

  // Fixed validation windows (stride T from the start of the validation split): batch `index`
  // holds windows index*batch .. index*batch+batch-1, wrapping around. Throws DatasetError if the
  // validation split is shorter than one sequence.
  void validation_batch(int64_t batch, int64_t index, std::vector<int64_t>& inputs,
                        std::vector<int64_t>& targets) const;

  int64_t validation_windows() const;  // distinct validation windows; 0 if the split is too short
  int64_t sequence_length() const { return sequence_length_; }

 private:
  uint64_t below(uint64_t n);  // uniform in [0, n), same on every platform

  std::shared_ptr<const TextDataset::Data> data_;
  int64_t sequence_length_;
  std::mt19937_64 rng_;
};

}  // namespace swarm::data
