// Tokenizers (bytes, SentencePiece trained here with Debian's spm_train on the bundled text), the
// datasets they feed, and pre-tokenized token files (`swarm tokenize`).
#include "worker/data/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "worker/data/token_file.h"

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::temp_directory_path() / ("swarm_tokenizer_" + std::to_string(::getpid()));

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A 512-piece SentencePiece model of the default job's text, trained once for this program.
const std::string& sp_model() {
  static const std::string model = [] {
    fs::create_directories(kDir);
    const auto fortunes = TextDataset::load("/usr/share/games/fortunes", 0.0);
    std::ofstream(kDir / "corpus.txt", std::ios::binary) << fortunes.train().substr(0, 400000);
    const std::string cmd = "spm_train --input=" + (kDir / "corpus.txt").string() + " --model_prefix=" +
                            (kDir / "sp").string() +
                            " --vocab_size=512 --byte_fallback=true --normalization_rule_name=identity"
                            " --add_dummy_prefix=false --remove_extra_whitespaces=false --character_coverage=1.0 --minloglevel=2 > " +
                            (kDir / "spm_train.log").string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "spm_train failed: " << read(kDir / "spm_train.log");
    return (kDir / "sp.model").string();
  }();
  return model;
}

// The model and files of this process go at its end.
class RemoveDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(kDir, ec);
  }
};
const auto* const kRemoveDir = ::testing::AddGlobalTestEnvironment(new RemoveDir);

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

TEST(Tokenizer, BytesIsOneTokenPerByte) {
  const auto t = Tokenizer::bytes();
  EXPECT_EQ(t.vocab_size(), 256);
  const std::string text = "caf\xc3\xa9\n\t\x01";
  const auto ids = t.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[3], 0xc3u);
  EXPECT_EQ(t.decode(ids), text);
  EXPECT_NE(error_of([&] { t.decode({65, 256}); }).find("id 256 at 1"), std::string::npos);
}

TEST(Tokenizer, SentencePieceTrainedWithSpmTrainRoundTripsAndCompresses) {
  const auto t = Tokenizer::sentencepiece(sp_model());
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_NE(t.describe().find("512 pieces"), std::string::npos) << t.describe();
  const std::string text = "Q:\tWhat is the difference between a duck?\nA:  One leg is both the same.\n";
  const auto ids = t.encode(text);
  // 512 pieces, 256 of them the byte fallback's: clearly fewer tokens than bytes all the same
  EXPECT_LT(ids.size(), text.size() * 3 / 4);
  for (auto id : ids) EXPECT_LT(id, 512u);
  EXPECT_EQ(t.decode(ids), text);
  // byte fallback: bytes the model never saw still round-trip
  const std::string odd = "\xe2\x98\x83 snow";
  EXPECT_EQ(t.decode(t.encode(odd)), odd);
}

TEST(Tokenizer, AMissingOrBadModelAndATooSmallVocabularyAreRefusedByName) {
  EXPECT_NE(error_of([] { Tokenizer::sentencepiece("/nonexistent/sp.model"); }).find("/nonexistent/sp.model"),
            std::string::npos);
  fs::create_directories(kDir);
  std::ofstream(kDir / "junk.model") << "not a model";
  EXPECT_NE(error_of([] { Tokenizer::sentencepiece((kDir / "junk.model").string()); }).find("junk.model"),
            std::string::npos);
  const auto sp = Tokenizer::sentencepiece(sp_model());
  const auto msg = error_of([&] { sp.check_model_vocab(256); });
  EXPECT_NE(msg.find("spec.model.vocabSize: 256"), std::string::npos) << msg;
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
  EXPECT_NO_THROW(sp.check_model_vocab(512));
  EXPECT_NO_THROW(Tokenizer::bytes().check_model_vocab(256));
  EXPECT_NE(error_of([] { Tokenizer::bytes().check_model_vocab(100); }).find("vocabSize: 100"), std::string::npos);
}

TEST(Tokenizer, ADatasetReadWithSentencePieceSamplesIdsOfTheText) {
  const auto sp = Tokenizer::sentencepiece(sp_model());
  const auto ds = TextDataset::load("/usr/share/games/fortunes", 0.02, &sp);
  EXPECT_GT(ds.train_tokens(), 10000u);
  EXPECT_LT(ds.train_tokens(), ds.train_bytes() * 3 / 4);
  EXPECT_GT(ds.validation_tokens(), 1000u);
  BatchSampler a(ds, 64, 7), b(ds, 64, 7);
  std::vector<int64_t> in, tg, in2, tg2;
  a.next(4, in, tg);
  b.next(4, in2, tg2);
  EXPECT_EQ(in, in2);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_LT(in[i], 512);
    if (i % 64 != 63) EXPECT_EQ(tg[i], in[i + 1]);
  }
  a.validation_batch(2, 0, in, tg);
  EXPECT_EQ(in.size(), 128u);
}

TEST(TokenFile, RoundTripsAtBothWidthsAndLoadsAsADataset) {
  fs::create_directories(kDir);
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 5000; ++i) ids.push_back((i * 7919u) % 300u);
  write_token_file((kDir / "a.tok").string(), 300, Sha256{}, ids);
  EXPECT_EQ(fs::file_size(kDir / "a.tok"), kTokenFileHeader + 2 * ids.size());
  EXPECT_TRUE(is_token_file((kDir / "a.tok").string()));
  auto f = read_token_file((kDir / "a.tok").string());
  EXPECT_EQ(f.vocab_size, 300u);
  EXPECT_EQ(f.ids, ids);
  ids.push_back(70000);
  write_token_file((kDir / "b.tok").string(), 100000, Sha256{}, ids);
  EXPECT_EQ(fs::file_size(kDir / "b.tok"), kTokenFileHeader + 4 * ids.size());
  EXPECT_EQ(read_token_file((kDir / "b.tok").string()).ids, ids);

  // As a dataset: the vocabulary must be the tokenizer's.
  std::vector<uint32_t> bytes(20000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint32_t>(i % 251);
  write_token_file((kDir / "c.tok").string(), 256, Sha256{}, bytes);
  const auto ds = TextDataset::load((kDir / "c.tok").string(), 0.1);
  EXPECT_EQ(ds.train_tokens(), 18000u);
  EXPECT_EQ(ds.validation_tokens(), 2000u);
  const auto sp = Tokenizer::sentencepiece(sp_model());
  const auto msg = error_of([&] { TextDataset::load((kDir / "c.tok").string(), 0.1, &sp); });
  EXPECT_NE(msg.find("c.tok: written by the tokenizer with SHA-256 " + std::string(64, '0') + ", but"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("has SHA-256 " + hex(sp.sha256())), std::string::npos) << msg;
}

TEST(TokenFile, MalformedFilesAreRefusedNamingTheFieldOrOffset) {
  fs::create_directories(kDir);
  const std::string p = (kDir / "bad.tok").string();
  write_token_file(p, 300, Sha256{}, {1, 2, 3, 4});
  const std::string good = read(p);
  auto with = [&](size_t at, const std::string& bytes) {
    std::string s = good;
    s.replace(at, bytes.size(), bytes);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
    return error_of([&] { read_token_file(p); });
  };
  EXPECT_NE(with(0, "SWTOKENX").find("magic"), std::string::npos);
  EXPECT_NE(with(8, std::string("\x03\0\0\0", 4)).find("version: 3"), std::string::npos);
  EXPECT_NE(with(12, std::string("\x03\0\0\0", 4)).find("width: 3"), std::string::npos);
  EXPECT_NE(with(24, std::string("\x05\0\0\0", 4)).find("count: 5"), std::string::npos);
  EXPECT_NE(with(66, std::string("\x2c\x01", 2)).find("id 300 at offset 66"), std::string::npos);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << good.substr(0, 20);
  EXPECT_NE(error_of([&] { read_token_file(p); }).find("header"), std::string::npos);
  EXPECT_NE(error_of([&] { write_token_file(p, 300, Sha256{}, {1, 300}); }).find("id 300 at index 1"), std::string::npos);
}

}  // namespace
}  // namespace swarm::data
