// worker/checkpoint/hf_checkpoint.h and hf_import.h on checkpoint folders written here by hand
// (the real library's files are checked in hf_import_test.cc): one file or shards with an index,
// F32, BF16 and F16, tied embeddings, and each way a folder can fail to fit, refused by name; and
// the tokenizer hf_init.h's load_hf_model gives a whole folder (`swarm eval/generate --model DIR`).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/hf_job.h"
#include "worker/checkpoint/hf_checkpoint.h"
#include "worker/checkpoint/hf_import.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/checkpoint/safetensors.h"
#include "worker/runtime/job_model.h"

namespace swarm::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Writes `tensors` as a safetensors file, each in the dtype named beside it.
void write_file(const fs::path& path, const std::vector<std::tuple<std::string, at::Tensor, std::string>>& tensors) {
  json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& [name, t, dtype] : tensors) {
    const auto type = dtype == "BF16" ? torch::kBFloat16 : dtype == "F16" ? torch::kHalf : dtype == "I64" ? torch::kLong : torch::kFloat;
    const auto c = t.to(type).contiguous();
    const size_t bytes = static_cast<size_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype}, {"shape", c.sizes().vec()}, {"data_offsets", {data.size(), data.size() + bytes}}};
    data.append(static_cast<const char*>(c.data_ptr()), bytes);
  }
  const std::string text = header.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << len << text << data;
}

json tiny_config(bool tied) {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 8}, {"hidden_size", 4},
          {"intermediate_size", 6}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
          {"num_key_value_heads", 1}, {"tie_word_embeddings", tied}};
}

// A module with the parameters the refs below fill.
struct Tiny : torch::nn::Module {
  Tiny() {
    embed = register_parameter("embed", torch::zeros({8, 4}));
    w0 = register_parameter("w0", torch::zeros({6, 4}));
    w1 = register_parameter("w1", torch::zeros({6, 4}));
    head = register_parameter("head", torch::zeros({8, 4}));
  }
  at::Tensor embed, w0, w1, head;
};

const std::vector<HfTensorRef> kRefs = {{"embed", "model.embed_tokens.weight", {8, 4}},
                                        {"w0", "model.layers.0.mlp.up_proj.weight", {6, 4}},
                                        {"w1", "model.layers.1.mlp.up_proj.weight", {6, 4}},
                                        {"head", "lm_head.weight", {8, 4}}};

class HfCheckpointFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hf-ckpt-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    embed_ = torch::randn({8, 4});
    w0_ = torch::randn({6, 4});
    w1_ = torch::randn({6, 4});
    head_ = torch::randn({8, 4});
  }
  void TearDown() override { fs::remove_all(dir_); }

  void config(const json& j) { std::ofstream(dir_ / "config.json") << j.dump(); }
  // Two shards and their index: the embedding and layer 0 in one, layer 1 and the head in the other.
  void sharded(const std::string& dtype, bool with_head = true) {
    config(tiny_config(!with_head));
    write_file(dir_ / "model-00001-of-00002.safetensors",
               {{"model.embed_tokens.weight", embed_, dtype}, {"model.layers.0.mlp.up_proj.weight", w0_, dtype}});
    std::vector<std::tuple<std::string, at::Tensor, std::string>> second = {{"model.layers.1.mlp.up_proj.weight", w1_, dtype}};
    if (with_head) second.emplace_back("lm_head.weight", head_, dtype);
    write_file(dir_ / "model-00002-of-00002.safetensors", second);
    json map = {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                {"model.layers.0.mlp.up_proj.weight", "model-00001-of-00002.safetensors"},
                {"model.layers.1.mlp.up_proj.weight", "model-00002-of-00002.safetensors"}};
    if (with_head) map["lm_head.weight"] = "model-00002-of-00002.safetensors";
    std::ofstream(dir_ / "model.safetensors.index.json") << json{{"metadata", {{"total_size", 1}}}, {"weight_map", map}}.dump();
  }
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  at::Tensor embed_, w0_, w1_, head_;
};

TEST_F(HfCheckpointFolder, ShardedFloat32IsLoadedByName) {
  sharded("F32");
  const HfCheckpoint ckpt(dir_.string());
  EXPECT_EQ(ckpt.config().num_key_value_heads, 1);
  EXPECT_TRUE(hf_tensor_problems(ckpt, kRefs).empty());
  Tiny m;
  load_hf_tensors(ckpt, kRefs, m);
  EXPECT_TRUE(torch::equal(m.embed, embed_));
  EXPECT_TRUE(torch::equal(m.w0, w0_));
  EXPECT_TRUE(torch::equal(m.w1, w1_));
  EXPECT_TRUE(torch::equal(m.head, head_));
}

TEST_F(HfCheckpointFolder, AStageOpensOnlyTheShardsHoldingItsTensors) {
  sharded("F32");
  const HfCheckpoint ckpt(dir_.string());
  fs::remove(dir_ / "model-00001-of-00002.safetensors");  // the other stage's shard
  Tiny m;
  load_hf_tensors(ckpt, {kRefs[2], kRefs[3]}, m);
  EXPECT_TRUE(torch::equal(m.w1, w1_));
  EXPECT_NE(error_of([&] { load_hf_tensors(ckpt, {kRefs[0]}, m); }).find("model-00001-of-00002.safetensors: cannot open"),
            std::string::npos);
}

TEST_F(HfCheckpointFolder, Bf16AndF16AreConvertedToFloat32) {
  for (const std::string dtype : {"BF16", "F16"}) {
    sharded(dtype);
    const HfCheckpoint ckpt(dir_.string());
    Tiny m;
    load_hf_tensors(ckpt, kRefs, m);
    const auto type = dtype == "BF16" ? torch::kBFloat16 : torch::kHalf;
    EXPECT_EQ(m.w0.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(m.w0, w0_.to(type).to(torch::kFloat))) << dtype;
    EXPECT_TRUE(torch::equal(m.head, head_.to(type).to(torch::kFloat))) << dtype;
  }
}

TEST_F(HfCheckpointFolder, ATiedCheckpointsHeadIsItsEmbedding) {
  sharded("F32", /*with_head=*/false);
  const HfCheckpoint ckpt(dir_.string());
  EXPECT_EQ(hf_source_name(ckpt, "lm_head.weight"), "model.embed_tokens.weight");
  Tiny m;
  load_hf_tensors(ckpt, kRefs, m);
  EXPECT_TRUE(torch::equal(m.head, embed_));
  // Untied on import: two tensors, trained apart from here on.
  EXPECT_NE(m.head.data_ptr(), m.embed.data_ptr());
}

TEST_F(HfCheckpointFolder, OneFileWithoutAnIndexIsRead) {
  config(tiny_config(false));
  write_file(dir_ / "model.safetensors", {{"model.embed_tokens.weight", embed_, "F32"},
                                          {"model.layers.0.mlp.up_proj.weight", w0_, "F32"},
                                          {"model.layers.1.mlp.up_proj.weight", w1_, "BF16"},
                                          {"lm_head.weight", head_, "F32"}});
  const HfCheckpoint ckpt(dir_.string());
  Tiny m;
  load_hf_tensors(ckpt, kRefs, m);
  EXPECT_TRUE(torch::equal(m.head, head_));
}

TEST_F(HfCheckpointFolder, AMissingTensorAWrongShapeAndAnUnreadDtypeAreNamed) {
  sharded("F32", /*with_head=*/false);
  config(tiny_config(false));  // not tied: lm_head.weight must be there
  std::vector<HfTensorRef> refs = kRefs;
  refs[1].shape = {7, 4};
  const HfCheckpoint ckpt(dir_.string());
  const auto problems = hf_tensor_problems(ckpt, refs);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "tensor model.layers.0.mlp.up_proj.weight in " + (dir_ / "model-00001-of-00002.safetensors").string() +
                             " has shape [6, 4], the spec needs [7, 4] for w0");
  EXPECT_EQ(problems[1], "tensor lm_head.weight is missing from " + dir_.string() + " (and tie_word_embeddings is false in " +
                             (dir_ / "config.json").string() + ") (the spec's head [8, 4] needs it)");
  Tiny m;
  EXPECT_EQ(error_of([&] { load_hf_tensors(ckpt, refs, m); }), "import: " + problems[0]);
  write_file(dir_ / "model-00001-of-00002.safetensors",
             {{"model.embed_tokens.weight", embed_, "I64"}, {"model.layers.0.mlp.up_proj.weight", w0_, "F32"}});
  const HfCheckpoint again(dir_.string());
  EXPECT_EQ(hf_tensor_problems(again, {kRefs[0]}).at(0),
            "tensor model.embed_tokens.weight in " + (dir_ / "model-00001-of-00002.safetensors").string() +
                " has dtype I64, not one that is read (F32, BF16, F16)");
  EXPECT_EQ(error_of([&] { load_hf_tensors(again, {{"nope", "lm_head.weight", {8, 4}}}, m); }),
            "import: the stage has no parameter nope (for lm_head.weight)");
}

TEST_F(HfCheckpointFolder, FoldersThatAreNotCheckpointsAreRefusedNamingTheFile) {
  EXPECT_EQ(error_of([&] { HfCheckpoint c((dir_ / "none").string()); }), "checkpoint " + (dir_ / "none").string() + ": not a folder");
  EXPECT_NE(error_of([&] { HfCheckpoint c(dir_.string()); }).find("config " + (dir_ / "config.json").string() + ": cannot read"),
            std::string::npos);
  std::ofstream(dir_ / "config.json") << "{\"model_type\": ";
  EXPECT_EQ(error_of([&] { HfCheckpoint c(dir_.string()); }), (dir_ / "config.json").string() + ": not JSON (byte 16)");
  config(tiny_config(false));
  EXPECT_EQ(error_of([&] { HfCheckpoint c(dir_.string()); }),
            "checkpoint " + dir_.string() + ": has neither model.safetensors nor model.safetensors.index.json");
  const std::string index = (dir_ / "model.safetensors.index.json").string();
  std::ofstream(index) << R"({"weight_map": {"lm_head.weight": "../outside.safetensors"}})";
  EXPECT_EQ(error_of([&] { HfCheckpoint c(dir_.string()); }),
            "index " + index + ": weight_map.lm_head.weight: must name a file in the folder, got \"../outside.safetensors\"");
  std::ofstream(index, std::ios::trunc) << R"({"weights": {}})";
  EXPECT_EQ(error_of([&] { HfCheckpoint c(dir_.string()); }), "index " + index + ": weight_map: must be an object {tensor: file}");
  // The index names a shard whose header lacks the tensor.
  sharded("F32");
  std::ofstream(index, std::ios::trunc)
      << R"({"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}})";
  const HfCheckpoint c(dir_.string());
  EXPECT_EQ(hf_tensor_problems(c, {kRefs[3]}).at(0),
            "checkpoint " + dir_.string() + ": tensor lm_head.weight: the index names " +
                (dir_ / "model-00001-of-00002.safetensors").string() + ", whose header does not have it");
}

// A folder with every tensor of tiny_config's Llama (zeros) and, optionally, a tokenizer.json: the
// model `swarm eval --model DIR` loads reads the folder's token files (scripts/hf_tokenize.py) with
// that tokenizer.json, and the bytes tokenizer without one.
TEST_F(HfCheckpointFolder, AWholeFoldersModelTakesItsTokenizerJson) {
  config(tiny_config(false));
  FromHfOptions o;
  o.layers_per_stage = {2};
  o.sequence_length = 4;
  const auto hf = parse_hf_config(tiny_config(false).dump(), "config.json");
  std::vector<std::tuple<std::string, at::Tensor, std::string>> all;
  for (const auto& r : hf_stage_refs(model_config(job_from_hf(hf, o)), 0)) all.emplace_back(r.hf, torch::zeros(r.shape), "F32");
  write_file(dir_ / "model.safetensors", all);
  EXPECT_EQ(load_hf_model(dir_.string(), 4).config_json["tokenizer"]["kind"], "bytes");
  std::ofstream(dir_ / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}}})";
  const auto m = load_hf_model(dir_.string(), 4);
  EXPECT_EQ(m.config_json["tokenizer"]["kind"], "huggingface");
  EXPECT_EQ(m.config_json["tokenizer"]["file"], (dir_ / "tokenizer.json").string());
  EXPECT_EQ(m.config.sequence_length, 4);
}

}  // namespace
}  // namespace swarm::runtime
