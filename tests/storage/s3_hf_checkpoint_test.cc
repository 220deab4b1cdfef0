// A Hugging Face checkpoint in object storage (worker/checkpoint/hf_checkpoint.h over a real MinIO
// server): the S3 client's HEAD and ranged GET, and a sharded checkpoint under s3://bucket/prefix
// read tensor by tensor: each tensor one ranged GET of its bytes, only the shards a stage needs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/job_spec.h"
#include "tests/storage/minio_server.h"
#include "worker/checkpoint/hf_checkpoint.h"
#include "worker/checkpoint/hf_import.h"
#include "worker/storage/s3_client.h"

namespace {

using swarm::CheckpointS3Spec;
using swarm::storage::S3Client;
using swarm::storage::S3Error;
using swarm::storage::S3Settings;
namespace runtime = swarm::runtime;

// A safetensors file's bytes holding `t` (float32) as `name`.
std::string safetensors_of(const std::string& name, const at::Tensor& t) {
  const auto c = t.contiguous();
  const size_t bytes = static_cast<size_t>(c.numel()) * sizeof(float);
  const std::string header =
      nlohmann::json{{name, {{"dtype", "F32"}, {"shape", c.sizes().vec()}, {"data_offsets", {0, bytes}}}}}.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return len + header + std::string(static_cast<const char*>(c.data_ptr()), bytes);
}

class S3HfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new swarm::testing::MinioServer("swarm-hf"); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static swarm::testing::MinioServer* server_;
};
swarm::testing::MinioServer* S3HfTest::server_ = nullptr;

TEST_F(S3HfTest, HeadAndRangedGetsReadPartsOfAnObject) {
  S3Client c(S3Settings::resolve(CheckpointS3Spec{}));
  c.put("swarm-hf", "range/obj", "0123456789abcdef");
  EXPECT_EQ(c.size("swarm-hf", "range/obj").value_or(-1), 16);
  EXPECT_FALSE(c.size("swarm-hf", "range/missing").has_value());
  EXPECT_EQ(c.get_range("swarm-hf", "range/obj", 3, 4), "3456");
  EXPECT_EQ(c.get_range("swarm-hf", "range/obj", 15, 1), "f");
  EXPECT_EQ(c.get_range("swarm-hf", "range/obj", 7, 0), "");
  const auto down = c.traffic().bytes_down;
  EXPECT_EQ(c.get_range("swarm-hf", "range/obj", 0, 2), "01");
  EXPECT_EQ(c.traffic().bytes_down - down, 2) << "only the bytes asked for travel";
  EXPECT_THROW(c.get_range("swarm-hf", "range/missing", 0, 2), S3Error);
  EXPECT_THROW(c.get_range("swarm-hf", "range/obj", 20, 2), S3Error);  // past the end: 416
}

TEST_F(S3HfTest, AShardedCheckpointInABucketIsReadTensorByTensor) {
  S3Client c(S3Settings::resolve(CheckpointS3Spec{}));
  const auto embed = torch::randn({8, 4}), head = torch::randn({8, 4});
  const nlohmann::json config = {{"model_type", "llama"}, {"vocab_size", 8}, {"hidden_size", 4}, {"intermediate_size", 6},
                                 {"num_hidden_layers", 1}, {"num_attention_heads", 2}};
  c.put("swarm-hf", "ckpt/config.json", config.dump());
  c.put("swarm-hf", "ckpt/a.safetensors", safetensors_of("model.embed_tokens.weight", embed));
  c.put("swarm-hf", "ckpt/b.safetensors", safetensors_of("lm_head.weight", head));
  c.put("swarm-hf", "ckpt/model.safetensors.index.json",
        R"({"weight_map": {"model.embed_tokens.weight": "a.safetensors", "lm_head.weight": "b.safetensors"}})");
  const runtime::HfCheckpoint ckpt("s3://swarm-hf/ckpt");
  EXPECT_EQ(ckpt.config().vocab_size, 8);
  EXPECT_EQ(ckpt.file_of("lm_head.weight"), "s3://swarm-hf/ckpt/b.safetensors");
  c.remove("swarm-hf", "ckpt/a.safetensors");  // the first stage's shard: the last stage never opens it
  EXPECT_TRUE(torch::equal(ckpt.read("lm_head.weight"), head));
  try {
    ckpt.read("model.embed_tokens.weight");
    ADD_FAILURE() << "a removed shard was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("s3://swarm-hf/ckpt/a.safetensors: cannot open: it does not exist"),
              std::string::npos)
        << e.what();
  }
  try {
    runtime::HfCheckpoint none("s3://swarm-hf/nothing-here");
    ADD_FAILURE() << "an empty prefix was opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("s3://swarm-hf/nothing-here/config.json: cannot read: it does not exist"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
