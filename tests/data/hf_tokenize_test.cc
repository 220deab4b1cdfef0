// scripts/hf_tokenize.py (Python `tokenizers`) writing token files that the C++ data loader reads:
// the ids decode back to the input through both the Python tokenizer and the swarm's byte-level
// decoder; a token file of another tokenizer.json is refused naming both hashes; ids at or above
// the vocabulary are refused. Needs the venv of scripts/install-python.sh ($SWARM_PYTHON): skipped
// without it unless SWARM_REQUIRE_PYTHON=1, where it fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "worker/data/token_file.h"
#include "worker/data/tokenizer.h"

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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

class HfTokenize : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* py = std::getenv("SWARM_PYTHON");
    if (py == nullptr || *py == '\0') {
      const char* require = std::getenv("SWARM_REQUIRE_PYTHON");
      if (require != nullptr && std::string(require) == "1")
        FAIL() << "SWARM_PYTHON is unset and SWARM_REQUIRE_PYTHON=1: run scripts/install-python.sh";
      GTEST_SKIP() << "SWARM_PYTHON is unset (the venv of scripts/install-python.sh)";
    }
    python_ = py;
    fs::create_directories(dir_ / "corpus" / "sub");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs `args` under the venv's python; its stdout goes to `out` (a file under dir_).
  int python(const std::string& args, const std::string& out = "python.out") const {
    const std::string cmd = python_ + " " + args + " > " + (dir_ / out).string() + " 2> " + (dir_ / "python.err").string();
    const int rc = std::system(cmd.c_str());
    if (rc != 0) ADD_FAILURE() << cmd << "\n" << read(dir_ / "python.err");
    return rc;
  }

  std::string tokenizer(const std::string& name, const std::string& text_file) const {
    const std::string out = (dir_ / name).string();
    python(std::string(SWARM_SOURCE_DIR) + "/tests/data/make_hf_tokenizer.py " + text_file + " 700 " + out);
    return out;
  }

  std::string python_;
  const fs::path dir_ = fs::temp_directory_path() / ("swarm_hf_tokenize_" + std::to_string(::getpid()));
  const std::string tool_ = std::string(SWARM_SOURCE_DIR) + "/scripts/hf_tokenize.py";
};

TEST_F(HfTokenize, TheToolsTokenFileIsReadByTheLoaderAndDecodesToTheInput) {
  // A corpus the dataset rules apply to: text, a strfile index and a symlink (skipped), JSON Lines
  // with characters outside ASCII.
  const std::string fortunes = read("/usr/share/games/fortunes/computers");
  ASSERT_GT(fortunes.size(), 10000u);
  std::ofstream(dir_ / "corpus" / "computers", std::ios::binary) << fortunes;
  std::ofstream(dir_ / "corpus" / "computers.dat", std::ios::binary) << std::string("\x02\0\0\0", 4);
  std::ofstream(dir_ / "corpus" / "sub" / "d.jsonl") << "{\"text\": \"caf\\u00e9 \\u2603 snow\"}\n{\"text\": \"two\"}\n";
  fs::create_symlink("../computers", dir_ / "corpus" / "sub" / "link");
  const std::string text = fortunes + "caf\xc3\xa9 \xe2\x98\x83 snow\ntwo\n";
  // What the loader itself reads from that folder as text is the same.
  DatasetOptions whole;
  whole.validation_fraction = 0;
  ASSERT_EQ(std::string(TextDataset::load((dir_ / "corpus").string(), whole).train()), text);

  const std::string t1 = tokenizer("t1.json", (dir_ / "corpus" / "computers").string());
  const std::string tok_file = (dir_ / "corpus.tok").string();
  ASSERT_EQ(python(tool_ + " --tokenizer " + t1 + " " + (dir_ / "corpus").string() + " --out " + tok_file), 0);

  const auto tok = Tokenizer::huggingface(t1);
  EXPECT_EQ(tok.vocab_size(), 700);
  const TokenFile f = read_token_file(tok_file);
  EXPECT_EQ(f.version, 2u);
  EXPECT_EQ(f.vocab_size, 700u);
  ASSERT_TRUE(f.tokenizer_sha256.has_value());
  EXPECT_EQ(hex(*f.tokenizer_sha256), hex(tok.sha256()));
  EXPECT_LT(f.ids.size(), text.size() / 2) << "a 700-token BPE trained on this text compresses it";

  // The loader reads it under the job's tokenizer; its ids are the file's, split 90/10.
  DatasetOptions o;
  o.validation_fraction = 0.1;
  const TextDataset ds = TextDataset::load(tok_file, o, &tok);
  EXPECT_EQ(ds.train_tokens() + ds.validation_tokens(), f.ids.size());
  BatchSampler sampler(ds, 64, 1);
  std::vector<int64_t> in, tg;
  sampler.training_batch_at(1, 0, in, tg);
  ASSERT_EQ(in.size(), 64u);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(static_cast<uint32_t>(in[i]), f.ids[i]);

  // Tokens -> text: through the Python tokenizer and through the swarm's byte-level decoder.
  ASSERT_EQ(python(tool_ + " --tokenizer " + t1 + " --decode " + tok_file, "decoded.txt"), 0);
  EXPECT_TRUE(read(dir_ / "decoded.txt") == text) << "the Python round trip differs from the input";
  EXPECT_TRUE(tok.decode(f.ids) == text) << "the swarm's decoding differs from the input";
}

TEST_F(HfTokenize, AnotherTokenizersFileAndIdsAtOrAboveTheVocabularyAreRefused) {
  std::ofstream(dir_ / "corpus" / "a.txt", std::ios::binary) << read("/usr/share/games/fortunes/computers");
  std::ofstream(dir_ / "corpus" / "b.txt", std::ios::binary) << read("/usr/share/games/fortunes/literature");
  const std::string t1 = tokenizer("t1.json", (dir_ / "corpus" / "a.txt").string());
  const std::string t2 = tokenizer("t2.json", (dir_ / "corpus" / "b.txt").string());
  const std::string tok_file = (dir_ / "a.tok").string();
  ASSERT_EQ(python(tool_ + " --tokenizer " + t1 + " " + (dir_ / "corpus" / "a.txt").string() + " --out " + tok_file), 0);
  const auto tok1 = Tokenizer::huggingface(t1), tok2 = Tokenizer::huggingface(t2);
  ASSERT_EQ(tok1.vocab_size(), tok2.vocab_size()) << "the same vocabulary size: only the hash tells them apart";
  ASSERT_NE(hex(tok1.sha256()), hex(tok2.sha256()));

  // The job's tokenizer is t2: refused before training, naming both hashes.
  JobSpec spec;
  spec.model.vocab_size = 700;
  spec.training.tokenizer.kind = TokenizerKind::HuggingFace;
  spec.training.tokenizer.file = t2;
  spec.training.dataset.path = tok_file;
  std::string e = error_of([&] { load_dataset(spec); });
  EXPECT_NE(e.find("a.tok: written by the tokenizer with SHA-256 " + hex(tok1.sha256())), std::string::npos) << e;
  EXPECT_NE(e.find("has SHA-256 " + hex(tok2.sha256())), std::string::npos) << e;
  // ... and the Python tool refuses to decode it with t2 too.
  const std::string cmd = python_ + " " + tool_ + " --tokenizer " + t2 + " --decode " + tok_file + " > /dev/null 2> " +
                          (dir_ / "decode.err").string();
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read(dir_ / "decode.err").find(hex(tok1.sha256())), std::string::npos) << read(dir_ / "decode.err");

  // With t1 it loads; a model vocabulary below the tokenizer's is refused naming spec.model.vocabSize.
  spec.training.tokenizer.file = t1;
  EXPECT_GT(load_dataset(spec).train_tokens(), 1000u);
  spec.model.vocab_size = 699;
  e = error_of([&] { load_dataset(spec); });
  EXPECT_NE(e.find("spec.model.vocabSize: 699 is smaller than the vocabulary of the tokenizer huggingface " + t1),
            std::string::npos) << e;

  // An id at the vocabulary size (700 = 0x02bc) written over the third id: refused naming its offset.
  std::string bytes = read(tok_file);
  bytes.replace(kTokenFileHeader + 4, 2, std::string("\xbc\x02", 2));
  std::ofstream(tok_file, std::ios::binary | std::ios::trunc) << bytes;
  spec.model.vocab_size = 700;
  e = error_of([&] { load_dataset(spec); });
  EXPECT_NE(e.find("id 700 at offset " + std::to_string(kTokenFileHeader + 4) + " is >= the vocabulary size 700"),
            std::string::npos) << e;
}

}  // namespace
}  // namespace swarm::data
