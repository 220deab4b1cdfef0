// BatchSampler: training windows in epochs, each trainer on its own shard (text_dataset.h).
#include <stdexcept>
#include <string>

#include "worker/data/text_dataset.h"

namespace swarm::data {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer: a bijection with good avalanche
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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

// Windows of t + 1 tokens at stride t in a split of n tokens.
int64_t fixed_windows(size_t n, int64_t t) {
  const auto tokens = static_cast<int64_t>(n);
  return tokens < t + 1 ? 0 : (tokens - 1) / t;
}

void check_batch(int64_t batch) {
  if (batch < 1) throw std::invalid_argument("BatchSampler: batch must be >= 1");
}

}  // namespace

WindowPermutation::WindowPermutation(uint64_t n, uint64_t key) : n_(n) {
  if (n == 0) throw std::invalid_argument("WindowPermutation: n must be >= 1");
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;  // an even width: balanced halves
  half_bits_ = bits / 2;
  for (int r = 0; r < kRounds; ++r) keys_[r] = mix64(key + 0x51ed2701u * static_cast<uint64_t>(r + 1));
}

uint64_t WindowPermutation::operator()(uint64_t i) const {
  if (i >= n_) throw std::out_of_range("WindowPermutation: index " + std::to_string(i) + " >= " + std::to_string(n_));
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = i;
  do {  // cycle-walking: the Feistel network permutes [0, 4^half_bits); walk until back in [0, n)
    uint64_t left = x >> half_bits_, right = x & mask;
    for (uint64_t k : keys_) {
      const uint64_t next = left ^ (mix64(right ^ k) & mask);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);
  return x;
}

BatchSampler::BatchSampler(const TextDataset& dataset, int64_t sequence_length, uint64_t seed, int stream,
                           int shards)
    : data_(dataset.data_), sequence_length_(sequence_length), seed_(seed), stream_(stream), shards_(shards) {
  if (sequence_length < 1) throw std::invalid_argument("BatchSampler: sequence_length must be >= 1");
  if (shards < 1 || stream < 0 || stream >= shards)
    throw std::invalid_argument("BatchSampler: trainer index " + std::to_string(stream) + " is not in [0, " +
                                std::to_string(shards) + ")");
  const auto t = static_cast<uint64_t>(sequence_length);
  const uint64_t n = dataset.train_tokens();
  if (n < t + 1) {
    throw DatasetError("dataset " + data_->path + ": training split has " + std::to_string(n) +
                       " tokens, fewer than one sequence (" + std::to_string(t + 1) + " tokens)");
  }
  // Windows start at offset + w * T (w < windows), the offset in [0, T) drawn per epoch; a split
  // shorter than two sequences has one window, at 0.
  windows_ = n >= 2 * t ? (n - t) / t : 1;
  if (windows_ < static_cast<uint64_t>(shards)) {
    throw DatasetError("dataset " + data_->path + ": training split has " + std::to_string(windows_) +
                       " windows of " + std::to_string(t) + " tokens, fewer than the " + std::to_string(shards) +
                       " trainers (spec.trainers.count): each needs its own");
  }
  start_epoch(0);
}

void BatchSampler::start_epoch(uint64_t epoch) {
  epoch_ = epoch;
  taken_ = 0;
  const uint64_t key = mix64(seed_ ^ mix64(epoch + 0x53574152ull /* 'SWAR' */));
  order_ = WindowPermutation(windows_, key);
  const auto t = static_cast<uint64_t>(sequence_length_);
  offset_ = data_->train_tokens() >= 2 * t ? mix64(key) % t : 0;
  // This shard's windows: positions stream, stream + shards, ... of the epoch's order.
  const auto s = static_cast<uint64_t>(stream_), k = static_cast<uint64_t>(shards_);
  shard_size_ = (windows_ - s + k - 1) / k;
}

int64_t BatchSampler::next_start() {
  if (taken_ == shard_size_) start_epoch(epoch_ + 1);
  const uint64_t position = static_cast<uint64_t>(stream_) + taken_ * static_cast<uint64_t>(shards_);
  ++taken_;
  return static_cast<int64_t>(offset_ + order_(position) * static_cast<uint64_t>(sequence_length_));
}

void BatchSampler::next(int64_t batch, std::vector<int64_t>& inputs, std::vector<int64_t>& targets) {
  check_batch(batch);
  const int64_t t = sequence_length_;
  inputs.resize(static_cast<size_t>(batch * t));
  targets.resize(static_cast<size_t>(batch * t));
  for (int64_t r = 0; r < batch; ++r)
    fill_from(data_->train, data_->train_ids, data_->tokenized, next_start(), t, r, inputs, targets);
}

int64_t BatchSampler::training_windows() const { return fixed_windows(data_->train_tokens(), sequence_length_); }

void BatchSampler::training_batch_at(int64_t batch, int64_t index, std::vector<int64_t>& inputs,
                                     std::vector<int64_t>& targets) const {
  check_batch(batch);
  const int64_t windows = training_windows(), t = sequence_length_;
  if (index < 0 || windows == 0) throw std::invalid_argument("BatchSampler: no training window " + std::to_string(index));
  inputs.resize(static_cast<size_t>(batch * t));
  targets.resize(static_cast<size_t>(batch * t));
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t w = (index * batch + r) % windows;
    fill_from(data_->train, data_->train_ids, data_->tokenized, w * t, t, r, inputs, targets);
  }
}

int64_t BatchSampler::validation_windows() const {
  return fixed_windows(data_->validation_tokens(), sequence_length_);
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
