// Hugging Face out, proved with the real library (issue 31, item 5, the export half): a random tiny
// Llama built by transformers (tests/checkpoint/hf_tiny_llama.py: grouped-query attention, an
// explicit head_dim, llama3 rope scaling, sharded) is imported into a 3-stage job (`swarm job
// from-hf`), trained 20 steps by `swarm local`, exported by `swarm export --format huggingface
// --max-shard-size 20KB`, and loaded by AutoModelForCausalLM.from_pretrained offline: its logits on a
// fixed batch equal the swarm's final model's (its stages' checkpoints, chained) within 1e-4.
// The default gpt2 job the same way, as GPT2LMHeadModel (its Conv1D weights turned).
// Also the folder's layout (config.json, the index, __metadata__ {"format": "pt"},
// generation_config.json) and the pure helpers of worker/checkpoint/hf_export.h.
//
// Needs the venv of scripts/install-python.sh in SWARM_PYTHON: skipped without it, unless
// SWARM_REQUIRE_PYTHON=1 (CI), where its absence fails. The helpers' tests need nothing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>

#include "common/job_spec.h"
#include "tests/local/swarm_process.h"
#include "worker/checkpoint/export.h"
#include "worker/checkpoint/hf_export.h"
#include "worker/checkpoint/safetensors.h"
#include "worker/runtime/job_model.h"

namespace swarm::e2e {
namespace {

std::string python() {
  const char* p = std::getenv("SWARM_PYTHON");
  return p == nullptr ? "" : p;
}

bool python_required() {
  const char* r = std::getenv("SWARM_REQUIRE_PYTHON");
  return r != nullptr && std::string(r) == "1";
}

int run_python(const std::string& args, const std::string& log) {
  const std::string cmd = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 '" + python() + "' " + SWARM_SOURCE_DIR +
                          "/tests/checkpoint/hf_tiny_llama.py " + args + " > '" + log + "' 2>&1";
  return std::system(cmd.c_str());
}

// The fixed batch both sides compute logits on: "Hello, world" and 12 assorted byte ids.
const std::vector<int64_t> kBatch = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100,
                                     0,  255, 17,  200, 3,   99, 128, 64,  32,  16,  8,   4};

// transformers' logits on the Hugging Face folder `hf` (written to DIR/logits.safetensors, the
// batch to DIR/batch.json) against the job's newest checkpointed stages in LOGS/checkpoints,
// chained: their largest difference, printed with `label`; the stages' step in `step`.
struct LogitsCheck {
  double diff = -1;
  int64_t step = -1;
  at::Tensor theirs;
};
LogitsCheck compare_logits(const std::string& label, const std::string& dir, const std::string& hf,
                           const std::string& job, const std::string& logs) {
  LogitsCheck out;
  std::ofstream(dir + "/batch.json") << nlohmann::json{
      {"inputs", {std::vector<int64_t>(kBatch.begin(), kBatch.begin() + 12), std::vector<int64_t>(kBatch.begin() + 12, kBatch.end())}}};
  if (run_python("logits " + hf + " " + dir + "/batch.json " + dir + "/logits.safetensors", dir + "/logits.log") != 0) {
    ADD_FAILURE() << read_text(dir + "/logits.log");
    return out;
  }
  const JobSpec spec = load_job_spec(job);
  const auto stages = runtime::load_checkpointed_stages(spec, runtime::CheckpointLocation(logs + "/checkpoints"),
                                                        read_text(logs + "/job-secret").substr(0, 64), &out.step);
  at::Tensor x = torch::tensor(kBatch).reshape({2, 12});
  {
    torch::NoGradGuard no_grad;
    for (const auto& s : stages) {
      s->eval();
      x = s->forward(x);
    }
  }
  out.theirs = runtime::read_safetensors(dir + "/logits.safetensors").tensors.at(0).second;
  if (x.sizes() != out.theirs.sizes()) {
    ADD_FAILURE() << "logits of shape " << x.sizes() << " against transformers' " << out.theirs.sizes();
    return out;
  }
  out.diff = (x - out.theirs).abs().max().item<double>();
  std::cout << "[ logits ] " << label << " step " << out.step << ": max |swarm - transformers(export)| = " << out.diff
            << " (logits up to " << out.theirs.abs().max().item<double>() << ")" << std::endl;
  return out;
}

TEST(HfExportHelpers, ByteSizesInHuggingFacesUnits) {
  EXPECT_EQ(runtime::parse_byte_size("20KB", "--max-shard-size"), 20000u);
  EXPECT_EQ(runtime::parse_byte_size("5GB", "--max-shard-size"), 5000000000u);
  EXPECT_EQ(runtime::parse_byte_size("1GiB", "--max-shard-size"), 1073741824u);
  EXPECT_EQ(runtime::parse_byte_size("123", "--max-shard-size"), 123u);
  for (const char* bad : {"", "MB", "5XB", "-3KB", "0"}) {
    try {
      runtime::parse_byte_size(bad, "--max-shard-size");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--max-shard-size: \"" + std::string(bad) + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(HfExportHelpers, ShardsKeepOrderAndStayUnderTheLimit) {
  using Plan = std::vector<std::vector<size_t>>;
  EXPECT_EQ(runtime::plan_shards({10, 10, 10}, 100), (Plan{{0, 1, 2}}));
  EXPECT_EQ(runtime::plan_shards({10, 10, 10}, 20), (Plan{{0, 1}, {2}}));
  EXPECT_EQ(runtime::plan_shards({5, 50, 5, 5}, 20), (Plan{{0}, {1}, {2, 3}}));  // a big one alone
}

TEST(HfExportHelpers, ConfigJsonIsLlamaForCausalLMWithLegacyRopeKeys) {
  model::ModelConfig c;
  c.architecture = model::Architecture::Llama;
  c.num_stages = 3;
  c.stage_layers = {2, 1, 3};
  c.llama.rope_scaling = {8.0, 1.0, 4.0, 8192};
  const auto j = runtime::hf_config_json(c, nlohmann::json{{"bos_token_id", 1}, {"eos_token_id", 2}});
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["num_hidden_layers"], 6);
  EXPECT_EQ(j["head_dim"], 32);
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(j["rope_theta"], 10000.0);
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["eos_token_id"], 2);
  EXPECT_EQ(runtime::hf_generation_config_json(nlohmann::json{{"bos_token_id", 1}})["bos_token_id"], 1);
  EXPECT_FALSE(runtime::hf_export_refusal(c).has_value());
}

TEST(HfExportHelpers, Gpt2ConfigJsonMatchesOurMathsAndSharedLayersAreRefused) {
  model::ModelConfig c;  // gpt2
  c.num_stages = 2;
  c.stage_layers = {2, 3};
  c.hidden_size = 96;
  c.num_heads = 4;
  c.gpt2.intermediate_size = 200;
  c.gpt2.layer_norm_eps = 1e-6;
  EXPECT_FALSE(runtime::hf_export_refusal(c).has_value());
  const auto j = runtime::hf_config_json(c, nullptr);
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["n_layer"], 5);
  EXPECT_EQ(j["n_embd"], 96);
  EXPECT_EQ(j["n_head"], 4);
  EXPECT_EQ(j["n_inner"], 200);
  EXPECT_EQ(j["n_positions"], c.sequence_length);
  EXPECT_EQ(j["activation_function"], "gelu");  // exact, as torch::gelu; GPT-2's own is gelu_new (tanh)
  EXPECT_EQ(j["layer_norm_epsilon"], 1e-6);
  EXPECT_EQ(j["scale_attn_by_inverse_layer_idx"], false);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_FALSE(j.contains("rope_scaling"));
  c.gpt2.shared_layers = true;
  const auto why = runtime::hf_export_refusal(c);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("shared layers"), std::string::npos) << *why;
}

TEST(HfExport, ImportedTrainedExportedAndLoadedByTransformersGivesTheSwarmsLogits) {
  if (python().empty()) {
    if (python_required()) FAIL() << "SWARM_PYTHON is not set (scripts/install-python.sh prints the python to use)";
    GTEST_SKIP() << "SWARM_PYTHON is not set: the transformers checks need scripts/install-python.sh's python";
  }
  const std::string dir = fresh_dir("hf-export"), src = dir + "/src", hf = dir + "/hf";
  ASSERT_EQ(run_python("make " + src + " --max-shard-size 20KB", dir + "/make.log"), 0) << read_text(dir + "/make.log");
  ASSERT_EQ(run({"job", "from-hf", src, "--stages", "3", "--name", "hf-export", "--learning-rate", "0.001"},
                dir + "/job.yaml", 60),
            0)
      << read_text(dir + "/job.yaml");
  const std::string logs = dir + "/logs";
  ASSERT_EQ(run({"local", dir + "/job.yaml", "--steps", "20", "--log-dir", logs, "--no-progress"}, dir + "/run.log",
                600),
            0)
      << read_text(dir + "/run.log");
  ASSERT_EQ(run({"export", "--job", dir + "/job.yaml", "--from", logs + "/checkpoints", "--secret-file",
                 logs + "/job-secret", "--format", "huggingface", "--out", hf, "--max-shard-size", "20KB"},
                dir + "/export.log", 120),
            0)
      << read_text(dir + "/export.log");

  // The folder: sharded with an index, pt metadata, the config transformers reads.
  const auto index = read_json(hf + "/model.safetensors.index.json");
  ASSERT_TRUE(index.is_object()) << read_text(dir + "/export.log");
  EXPECT_TRUE(index["weight_map"].contains("model.layers.5.mlp.down_proj.weight"));
  EXPECT_TRUE(index["weight_map"].contains("lm_head.weight"));
  const std::string shard = hf + "/" + index["weight_map"]["lm_head.weight"].get<std::string>();
  EXPECT_EQ(runtime::read_safetensors(shard).metadata.at("format"), "pt");
  const auto config = read_json(hf + "/config.json");
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["num_hidden_layers"], 6);
  EXPECT_TRUE(config.contains("rope_theta"));
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "llama3");
  EXPECT_TRUE(read_json(hf + "/generation_config.json").is_object());

  // transformers' logits on the exported folder against the swarm's trained stages.
  const auto check = compare_logits("llama", dir, hf, dir + "/job.yaml", logs);
  EXPECT_GE(check.step, 20);
  ASSERT_GE(check.diff, 0);
  EXPECT_LT(check.diff, 1e-4);
  const auto& theirs = check.theirs;
  // Trained: the export is not the imported checkpoint's weights.
  ASSERT_EQ(run_python("logits " + src + " " + dir + "/batch.json " + dir + "/src-logits.safetensors",
                       dir + "/src-logits.log"),
            0);
  const auto before = runtime::read_safetensors(dir + "/src-logits.safetensors").tensors.at(0).second;
  EXPECT_GT((before - theirs).abs().max().item<double>(), 1e-3);
  fs::remove_all(dir);
}

// The default job (examples/tiny-lm.yaml, gpt2: LayerNorm, learned positions, exact GELU, an
// untied head) trained 3 steps by `swarm local`, exported as GPT2LMHeadModel, loaded by
// transformers: its logits equal the swarm's stages', chained, within 1e-4.
TEST(HfExport, TheDefaultGpt2JobLoadsInTransformersAsGPT2LMHeadModelWithTheSwarmsLogits) {
  if (python().empty()) {
    if (python_required()) FAIL() << "SWARM_PYTHON is not set (scripts/install-python.sh prints the python to use)";
    GTEST_SKIP() << "SWARM_PYTHON is not set: the transformers checks need scripts/install-python.sh's python";
  }
  const std::string dir = fresh_dir("hf-export-gpt2"), hf = dir + "/hf", logs = dir + "/logs";
  const std::string job = std::string(SWARM_SOURCE_DIR) + "/examples/tiny-lm.yaml";
  ASSERT_EQ(run({"local", job, "--steps", "3", "--log-dir", logs, "--no-progress"}, dir + "/run.log", 600), 0)
      << read_text(dir + "/run.log");
  ASSERT_EQ(run({"export", "--job", job, "--from", logs + "/checkpoints", "--secret-file", logs + "/job-secret",
                 "--format", "huggingface", "--out", hf},
                dir + "/export.log", 120),
            0)
      << read_text(dir + "/export.log");
  const auto config = read_json(hf + "/config.json");
  ASSERT_TRUE(config.is_object()) << read_text(dir + "/export.log");
  EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
  const auto file = runtime::read_safetensors(hf + "/model.safetensors");
  EXPECT_EQ(file.metadata.at("format"), "pt");
  bool saw_c_attn = false;
  for (const auto& [name, t] : file.tensors)
    if (name == "transformer.h.0.attn.c_attn.weight") {
      saw_c_attn = true;
      EXPECT_EQ(t.sizes(), (at::IntArrayRef{192, 576}));  // Conv1D: [in, out]
    }
  EXPECT_TRUE(saw_c_attn);

  const auto check = compare_logits("gpt2", dir, hf, job, logs);
  EXPECT_GE(check.step, 3);
  ASSERT_GE(check.diff, 0);
  EXPECT_LT(check.diff, 1e-4);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace swarm::e2e
