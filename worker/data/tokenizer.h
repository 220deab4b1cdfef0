// Text to token ids and back (spec.training.tokenizer).
//
//   bytes          one token per byte: vocabulary 256, no model file
//   sentencepiece  a SentencePiece model (Debian's libsentencepiece): its vocabulary, its pieces
//   huggingface    a Hugging Face tokenizer.json: its vocabulary (model.vocab and added_tokens) and
//                  byte-level decoding only. Its text is encoded outside, by scripts/hf_tokenize.py
//                  (Python `tokenizers`), into token files that carry the file's SHA-256: encode()
//                  refuses, and a dataset of text under it is refused naming the file.
//
// Every tokenizer has an identity, sha256(): of its file's bytes (all zero for bytes). A token file
// records the identity of the tokenizer that wrote it, and a dataset refuses one written by another.
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
#include "worker/data/token_file.h"

namespace swarm::data {

struct HfVocabulary;  // hf_vocabulary.h

class Tokenizer {
 public:
  static Tokenizer bytes();
  // Throws DatasetError naming the file: missing, unreadable, not a SentencePiece model.
  static Tokenizer sentencepiece(const std::string& model_path);
  // Throws DatasetError naming the file: missing, unreadable, not JSON, no model.vocab, an id that
  // is negative or above 2^32 - 2.
  static Tokenizer huggingface(const std::string& tokenizer_json);
  static Tokenizer from_spec(const TokenizerSpec& spec);

  TokenizerKind kind() const { return kind_; }
  int64_t vocab_size() const;
  // SHA-256 of the tokenizer's file; all zero for bytes.
  const Sha256& sha256() const { return sha256_; }
  // "bytes", "sentencepiece MODEL (N pieces, sha256 H)", "huggingface FILE (N tokens, sha256 H)"
  std::string describe() const;

  // Appends the ids of `text` to `out`. Throws DatasetError for a huggingface tokenizer (its text is
  // pre-tokenised: scripts/hf_tokenize.py).
  void encode(std::string_view text, std::vector<uint32_t>& out) const;
  std::vector<uint32_t> encode(std::string_view text) const;
  // Throws std::invalid_argument for an id outside the vocabulary, DatasetError for a huggingface
  // tokenizer whose decoder is not byte-level (or an id it has no token for).
  std::string decode(const std::vector<uint32_t>& ids) const;

  // The model must have a row for every id this tokenizer emits: throws std::invalid_argument
  // naming spec.model.vocabSize and both sizes otherwise.
  void check_model_vocab(int64_t model_vocab_size) const;

 private:
  TokenizerKind kind_ = TokenizerKind::Bytes;
  std::string model_path_;
  Sha256 sha256_{};
  struct Model;
  std::shared_ptr<const Model> sp_;
  std::shared_ptr<const HfVocabulary> hf_;  // huggingface: the tokens by id
};

// spec.training.dataset read with spec.training.tokenizer, after checking spec.model.vocabSize
// against the tokenizer's vocabulary (what the trainers and the single-process baseline train on).
TextDataset load_dataset(const JobSpec& spec);

}  // namespace swarm::data
