// Data for the trainers (spec.training.dataset): text, JSON Lines and token files, as bytes
// (vocabulary 256: one token per byte) or as the ids of a tokenizer (tokenizer.h: SentencePiece).
//
// TextDataset::load() reads a file, or every file under a directory (recursively), into memory
// and splits it into a training and a validation part: the last `validation_fraction` of each
// file is held out (cumulative rounding keeps the total at floor(total * fraction)). How a file is
// read (DatasetOptions::format, spec.training.dataset.format):
//   text    its bytes (a file with a NUL byte in its first 8 KiB is binary: skipped in a directory,
//           refused when named alone)
//   jsonl   one JSON object per line, its `text_field` string a document; documents are joined
//           with a newline; blank lines are skipped. A line that is not JSON, or lacks the field,
//           fails naming the file and line.
//   tokens  a `swarm tokenize` file (token_file.h): ids; its vocabulary must be the tokenizer's
//   auto    tokens when the file starts with the token-file magic, jsonl for *.jsonl / *.ndjson,
//           text otherwise
// With a SentencePiece tokenizer, or any token file, the samplers draw ids (text is encoded,
// each file's training and validation parts separately); with bytes only, they draw bytes.
//
// What load() reads under a directory: regular files and symlinks to regular files, sorted by path;
// a file reached twice (a symlink to a file already read, e.g. fortune's `*.u8`) is read once;
// hidden entries (name starting with '.') are skipped, hidden directories are not entered;
// a strfile index (`X.dat` next to `X`, as in /usr/share/games/fortunes) and empty files are
// skipped; symlinked directories are not followed.
//
// BatchSampler: training windows of T + 1 tokens (T = sequence length) start at offset + w * T,
// w < W = (tokens - T) / T; an epoch visits every w once, in an order drawn from (seed, epoch)
// (WindowPermutation), with an offset in [0, T) drawn from them too. With N trainers, trainer i
// takes the positions i, i + N, i + 2N, ... of that order: the N shards of an epoch are disjoint
// and together cover it, so no two trainers feed the same window in one epoch, and each trainer's
// sequence depends only on (seed, i, N) and the data. Validation windows are fixed (stride T).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_spec.h"

namespace swarm::data {

// Every dataset problem; the message names the path concerned.
class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer;

struct DatasetOptions {
  double validation_fraction = 0.02;  // in [0, 1)
  DatasetFormat format = DatasetFormat::Auto;
  std::string text_field = "text";  // jsonl: the field holding each document's text
};

class TextDataset {
 public:
  // Throws DatasetError naming the file (and line or offset): missing path, no data found,
  // unreadable file, a binary file named alone, a JSON Lines line that is not a JSON object with
  // the text field, a token file with another vocabulary or an id >= its vocabulary, bad fraction.
  // `tokenizer` null: bytes.
  static TextDataset load(const std::string& path, const DatasetOptions& options,
                          const Tokenizer* tokenizer = nullptr);
  static TextDataset load(const std::string& path, double validation_fraction = 0.02,
                          const Tokenizer* tokenizer = nullptr) {
    DatasetOptions o;
    o.validation_fraction = validation_fraction;
    return load(path, o, tokenizer);
  }

  // Bytes of text (text and JSON Lines documents) in each split, tokenized or not.
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
    std::string train;       // the bytes, when not tokenized
    std::string validation;
    size_t train_bytes = 0;  // text read into each split
    size_t validation_bytes = 0;
    bool tokenized = false;  // the samplers read train_ids / validation_ids, not the bytes
    std::vector<uint32_t> train_ids;
    std::vector<uint32_t> validation_ids;
    // The tokens the samplers draw from in each split: ids when tokenized, else bytes.
    size_t train_tokens() const { return tokenized ? train_ids.size() : train.size(); }
    size_t validation_tokens() const { return tokenized ? validation_ids.size() : validation.size(); }
  };
  explicit TextDataset(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  std::shared_ptr<const Data> data_;  // shared with samplers: cheap copies, no dangling
};

// A pseudo-random permutation of [0, n), computed per index in O(1) memory (a 4-round Feistel
// network over the next even power of two, cycle-walking back into range): an epoch's order of
// windows without materializing it.
class WindowPermutation {
 public:
  WindowPermutation() = default;
  WindowPermutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t i) const;  // i < n
  uint64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 4;
  uint64_t n_ = 0;
  int half_bits_ = 1;
  uint64_t keys_[kRounds] = {};
};

// Not thread-safe; use one sampler per thread (different streams for different data).
class BatchSampler {
 public:
  // Trainer `stream` of `shards` (spec.trainers.count). Throws DatasetError (naming the path) if
  // the training split is shorter than one sequence (sequence_length + 1 tokens) or has fewer
  // windows than there are shards; std::invalid_argument if sequence_length < 1 or stream is not
  // in [0, shards).
  BatchSampler(const TextDataset& dataset, int64_t sequence_length, uint64_t seed, int stream = 0,
               int shards = 1);

  // `batch` training windows, the next of this shard: inputs = tokens[s, s+T),
  // targets = tokens[s+1, s+T+1), row-major [batch, T].
  void next(int64_t batch, std::vector<int64_t>& inputs, std::vector<int64_t>& targets);
  // Where the next training window starts (what next() fills a row from).
  int64_t next_start();
  uint64_t epoch() const { return epoch_; }
  uint64_t windows() const { return windows_; }  // per epoch, over every shard

  // Fixed validation windows (stride T from the start of the validation split): batch `index`
  // holds windows index*batch .. index*batch+batch-1, wrapping around. Throws DatasetError if the
  // validation split is shorter than one sequence.
  void validation_batch(int64_t batch, int64_t index, std::vector<int64_t>& inputs,
                        std::vector<int64_t>& targets) const;

  int64_t validation_windows() const;  // distinct validation windows; 0 if the split is too short
  // The same fixed windows over the training split (swarm eval reads a whole file so).
  void training_batch_at(int64_t batch, int64_t index, std::vector<int64_t>& inputs,
                         std::vector<int64_t>& targets) const;
  int64_t training_windows() const;
  int64_t sequence_length() const { return sequence_length_; }

 private:
  void start_epoch(uint64_t epoch);

  std::shared_ptr<const TextDataset::Data> data_;
  int64_t sequence_length_;
  uint64_t seed_;
  int stream_, shards_;
  uint64_t windows_ = 0;     // W
  uint64_t epoch_ = 0;
  uint64_t offset_ = 0;      // this epoch's window offset, < T
  uint64_t shard_size_ = 0;  // windows of this shard in an epoch
  uint64_t taken_ = 0;       // of them, taken this epoch
  WindowPermutation order_;
};

}  // namespace swarm::data
