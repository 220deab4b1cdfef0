#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/model/config.h"
#include "worker/model/device.h"

namespace swarm::model {
namespace {

TEST(Device, PickDevice) {
  EXPECT_EQ(pick_device("cpu"), c10::Device(c10::kCPU));
  const auto dev = pick_device("auto");
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(dev.is_cuda());
    EXPECT_TRUE(pick_device("cuda").is_cuda());
  } else {
    EXPECT_TRUE(dev.is_cpu());
    try {
      pick_device("cuda");
      FAIL() << "cuda without CUDA did not throw";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos);
    }
  }
  EXPECT_THROW(pick_device("gpu"), std::invalid_argument);
  EXPECT_EQ(device_string(pick_device("cpu")), "cpu");
}

TEST(Config, ValidateAndDescribe) {
  ModelConfig c;
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(describe(c), "vocab=256 hidden=192 heads=6 layers/stage=2 seq=128 mlp=4 stages=2 shared=0");
  c.num_heads = 5;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c = ModelConfig{};
  c.num_stages = 0;
  EXPECT_THROW(validate(c), std::invalid_argument);
}

}  // namespace
}  // namespace swarm::model
