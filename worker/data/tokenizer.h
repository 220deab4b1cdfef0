// Text to token ids and back (spec.training.tokenizer).
//
//   bytes          one token per byte: vocabulary 256, no model file
//   sentencepiece  a SentencePiece model (Debian's libsentencepiece): its vocabulary, its pieces
//
// A Tokenizer is cheap to copy (the model is shared) and safe to use from several threads at once
// (SentencePieceProcessor's Encode/Decode are const). SentencePiece is reached through
// libswarm_sentencepiece.so (sentencepiece_shim.cc: why), looked for in $SWARM_SENTENCEPIECE_LIB,
// then next to the program (../lib, .), then where the build put it, then the loader's path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_spec.h"
#include "worker/data/text_dataset.h"

namespace swarm::data {

class Tokenizer {
 public:
  static Tokenizer bytes();
  // Throws DatasetError naming the file: missing, unreadable, not a SentencePiece model.
  static Tokenizer sentencepiece(const std::string& model_path);
  static Tokenizer from_spec(const TokenizerSpec& spec);

  TokenizerKind kind() const { return kind_; }
  int64_t vocab_size() const;
  // "bytes" or "sentencepiece MODEL (N pieces)"
  std::string describe() const;

  // Appends the ids of `text` to `out`.
  void encode(std::string_view text, std::vector<uint32_t>& out) const;
  std::vector<uint32_t> encode(std::string_view text) const;
  // Throws std::invalid_argument for an id outside the vocabulary.
  std::string decode(const std::vector<uint32_t>& ids) const;

  // The model must have a row for every id this tokenizer emits: throws std::invalid_argument
  // naming spec.model.vocabSize and both sizes otherwise.
  void check_model_vocab(int64_t model_vocab_size) const;

 private:
  TokenizerKind kind_ = TokenizerKind::Bytes;
  std::string model_path_;
  struct Model;
  std::shared_ptr<const Model> sp_;
};

// spec.training.dataset read with spec.training.tokenizer, after checking spec.model.vocabSize
// against the tokenizer's vocabulary (what the trainers and the single-process baseline train on).
TextDataset load_dataset(const JobSpec& spec);

}  // namespace swarm::data
