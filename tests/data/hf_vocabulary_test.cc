// A Hugging Face tokenizer.json's vocabulary and byte-level decoding (hf_vocabulary.h), and what a
// dataset under a huggingface tokenizer accepts: token files of that tokenizer only (its SHA-256,
// its vocabulary), no text, no version-1 file without a hash. Hand-written tokenizer.json files:
// no Python (tests/data/hf_tokenize_test.cc runs the real tool).
#include "worker/data/hf_vocabulary.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/crypto.h"
#include "worker/data/token_file.h"
#include "worker/data/tokenizer.h"

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

// "Ġ" (U+0120) stands for the space byte, "Ċ" (U+010A) for '\n', "Ã©" for the two bytes of 'é'.
const std::string kTokenizer = R"({
  "version": "1.0",
  "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": true}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "vocab": {"a": 0, "\u0120b": 1, "\u010a": 2, "caf\u00c3\u00a9": 3, "!": 4},
            "merges": []}
})";

TEST(HfVocabulary, ReadsTheVocabularyAndAddedTokensAndDecodesByteLevel) {
  const HfVocabulary v = parse_hf_tokenizer(kTokenizer);
  EXPECT_EQ(v.size(), 6);
  EXPECT_TRUE(v.byte_level);
  EXPECT_EQ(decode_hf(v, {0, 1, 2, 3, 4, 5}), "a b\ncaf\xc3\xa9!<|endoftext|>");
  // A Sequence holding a ByteLevel decoder is byte-level too.
  EXPECT_TRUE(parse_hf_tokenizer(R"({"model": {"vocab": {"a": 0, "b": 1}},
                                     "decoder": {"type": "Sequence", "decoders": [{"type": "ByteLevel"}]}})")
                  .byte_level);
}

TEST(HfVocabulary, MalformedFilesAndUndecodableIdsAreRefusedSayingWhy) {
  EXPECT_NE(error_of([] { parse_hf_tokenizer("{not json"); }).find("not JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_tokenizer(R"({"model": {}})"); }).find("no model.vocab"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_tokenizer(R"({"model": {"vocab": {"a": 0, "b": -1}}})"); })
                .find("model.vocab[\"b\"]: id -1 is outside"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_tokenizer(R"({"model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 2}]})"); })
                .find("added_tokens[0]: needs an integer id and a string content"),
            std::string::npos);
  const HfVocabulary v = parse_hf_tokenizer(kTokenizer);
  EXPECT_NE(error_of([&] { decode_hf(v, {0, 6}); }).find("id 6 at 1 has no token"), std::string::npos);
  const HfVocabulary wordpiece = parse_hf_tokenizer(R"({"model": {"vocab": {"a": 0, "b": 1}}, "decoder": {"type": "WordPiece"}})");
  EXPECT_FALSE(wordpiece.byte_level);
  EXPECT_NE(error_of([&] { decode_hf(wordpiece, {0}); }).find("not ByteLevel"), std::string::npos);
}

class HfDataset : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary | std::ios::trunc) << bytes;
    return dir_ / name;
  }
  const fs::path dir_ = fs::temp_directory_path() / ("swarm_hf_vocabulary_" + std::to_string(::getpid()));
};

TEST_F(HfDataset, TokenFilesOfTheSameTokenizerLoadAndAnyOtherIsRefusedWithBothHashes) {
  const auto tok = Tokenizer::huggingface(write("tokenizer.json", kTokenizer).string());
  EXPECT_EQ(tok.kind(), TokenizerKind::HuggingFace);
  EXPECT_EQ(tok.vocab_size(), 6);
  EXPECT_EQ(tok.sha256(), crypto::sha256(kTokenizer.data(), kTokenizer.size()));
  EXPECT_NE(tok.describe().find("6 tokens, sha256 " + hex(tok.sha256())), std::string::npos) << tok.describe();
  EXPECT_EQ(tok.decode({0, 1, 5}), "a b<|endoftext|>");

  const std::vector<uint32_t> ids = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3};
  write_token_file((dir_ / "good.tok").string(), 6, tok.sha256(), ids);
  DatasetOptions o;
  o.validation_fraction = 0.2;
  const auto ds = TextDataset::load((dir_ / "good.tok").string(), o, &tok);
  EXPECT_EQ(ds.train_tokens(), 8u);
  EXPECT_EQ(ds.validation_tokens(), 2u);

  // The same vocabulary from another tokenizer.json (one byte differs): refused, both hashes named.
  const std::string other_json = kTokenizer + " ";
  const auto other = Tokenizer::huggingface(write("other.json", other_json).string());
  write_token_file((dir_ / "other.tok").string(), 6, other.sha256(), ids);
  std::string e = error_of([&] { TextDataset::load((dir_ / "other.tok").string(), o, &tok); });
  EXPECT_NE(e.find("other.tok: written by the tokenizer with SHA-256 " + hex(other.sha256())), std::string::npos) << e;
  EXPECT_NE(e.find("has SHA-256 " + hex(tok.sha256())), std::string::npos) << e;

  // Text under it, and a version-1 file (no hash), are refused naming the file.
  write("notes.txt", "plain text");
  e = error_of([&] { TextDataset::load((dir_ / "notes.txt").string(), o, &tok); });
  EXPECT_NE(e.find("notes.txt: is text"), std::string::npos) << e;
  EXPECT_NE(e.find("scripts/hf_tokenize.py"), std::string::npos) << e;
  std::string v1 = std::string("SWTOKENS") + std::string("\x01\0\0\0\x02\0\0\0\x06\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 24) +
                   std::string("\x01\0\x02\0", 4);
  write("v1.tok", v1);
  e = error_of([&] { TextDataset::load((dir_ / "v1.tok").string(), o, &tok); });
  EXPECT_NE(e.find("v1.tok: a version-1 token file records no tokenizer hash"), std::string::npos) << e;
  // ... which the byte tokenizer still reads (its vocabulary is checked, as before version 2).
  const auto f = read_token_file((dir_ / "v1.tok").string());
  EXPECT_EQ(f.version, 1u);
  EXPECT_FALSE(f.tokenizer_sha256.has_value());
  EXPECT_EQ(f.ids, (std::vector<uint32_t>{1, 2}));

  // Encoding is not done here: the message says what does it.
  e = error_of([&] { tok.encode("a b"); });
  EXPECT_NE(e.find("scripts/hf_tokenize.py --tokenizer " + (dir_ / "tokenizer.json").string()), std::string::npos) << e;
}

TEST_F(HfDataset, AModelVocabularyBelowTheTokenizersAndAMissingFileAreRefusedByName) {
  const auto path = write("tokenizer.json", kTokenizer).string();
  JobSpec spec;
  spec.training.tokenizer.kind = TokenizerKind::HuggingFace;
  spec.training.tokenizer.file = path;
  spec.model.vocab_size = 5;
  write_token_file((dir_ / "a.tok").string(), 6, Tokenizer::huggingface(path).sha256(), {0, 1, 2, 3, 4, 5, 0, 1});
  spec.training.dataset.path = (dir_ / "a.tok").string();
  std::string e = error_of([&] { load_dataset(spec); });
  EXPECT_NE(e.find("spec.model.vocabSize: 5 is smaller than the vocabulary of the tokenizer huggingface " + path),
            std::string::npos) << e;
  spec.model.vocab_size = 6;
  EXPECT_EQ(load_dataset(spec).train_tokens() + load_dataset(spec).validation_tokens(), 8u);

  e = error_of([&] { Tokenizer::huggingface((dir_ / "missing.json").string()); });
  EXPECT_NE(e.find("Hugging Face tokenizer " + (dir_ / "missing.json").string() + " does not exist"), std::string::npos) << e;
  write("bad.json", "{\"model\": 3}");
  e = error_of([&] { Tokenizer::huggingface((dir_ / "bad.json").string()); });
  EXPECT_NE(e.find("bad.json (spec.training.tokenizer.file): no model.vocab"), std::string::npos) << e;
}

}  // namespace
}  // namespace swarm::data
