#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/model/config.h"
#include "worker/model/device.h"
#include "worker/model/transformer.h"

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
  EXPECT_EQ(describe(c), "gpt2 vocab=256 hidden=192 heads=6 layers=[2,2] seq=128 mlp=768 shared=0");
  EXPECT_EQ(c.total_layers(), 4);
  c.num_heads = 5;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c = ModelConfig{};
  c.num_stages = 0;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c = ModelConfig{};
  c.stage_layers = {2, 2, 2};  // three counts for two stages
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.stage_layers = {1, 0};
  EXPECT_THROW(validate(c), std::invalid_argument);
  // Uneven stages keep global layer indices.
  c.num_stages = 3;
  c.stage_layers = {1, 3, 2};
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(c.first_layer(0), 0);
  EXPECT_EQ(c.first_layer(1), 1);
  EXPECT_EQ(c.first_layer(2), 4);
  EXPECT_EQ(c.total_layers(), 6);
}

TEST(Config, LlamaRules) {
  ModelConfig c;
  c.architecture = Architecture::Llama;
  c.hidden_size = 96;
  c.num_heads = 6;
  c.llama.num_kv_heads = 2;
  c.llama.head_dim = 20;  // 6 x 20 = 120 != 96: an explicit head width is fine for llama
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(c.head_dim(), 20);
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(describe(c), "llama vocab=256 hidden=96 heads=6 layers=[2,2] seq=128 kv_heads=2 head_dim=20 mlp=512 "
                         "eps=1e-05 theta=10000 bias=00");
  c.llama.num_kv_heads = 4;  // 6 heads cannot be grouped in 4
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.llama.num_kv_heads = 3;
  c.llama.head_dim = 21;  // rotary pairs need an even width
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.llama.head_dim = 16;
  c.llama.rope_scaling.factor = 8;
  c.llama.rope_scaling.high_freq_factor = 0.5;  // below low_freq_factor
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.llama.rope_scaling.high_freq_factor = 4;
  EXPECT_NO_THROW(validate(c));
  c.gpt2.shared_layers = true;  // sharing is gpt2's
  EXPECT_THROW(validate(c), std::invalid_argument);
}

// The attention the stages run (fused scaled_dot_product_attention on libtorch 2.x) is the
// explicit softmax(q k^T / sqrt(d) + causal mask) v, in values and in the gradients of q, k and v.
TEST(Attention, FusedMatchesExplicitForwardAndBackward) {
  torch::manual_seed(7);
  const int64_t B = 3, T = 37, nh = 4, hd = 16;
  auto qkv = torch::randn({B, T, 3 * nh * hd}).requires_grad_(true);
  auto qkv_ref = qkv.detach().clone().requires_grad_(true);
  auto y = causal_self_attention(qkv, nh);
  auto parts = qkv_ref.view({B, T, 3, nh, hd}).permute({2, 0, 3, 1, 4});
  auto y_ref = explicit_causal_attention(parts[0], parts[1], parts[2]);
  ASSERT_EQ(y.sizes(), y_ref.sizes());
  EXPECT_LT((y - y_ref).abs().max().item<double>(), 2e-5);
  auto g = torch::randn(y.sizes());
  y.backward(g);
  y_ref.backward(g);
  EXPECT_LT((qkv.grad() - qkv_ref.grad()).abs().max().item<double>(), 2e-5);
  // Causal: position 0's output depends on position 0 only (changing a later position leaves it).
  auto later = qkv.detach().clone();
  later.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1)}, 0.0);
  auto y0 = causal_self_attention(later, nh).detach();
  EXPECT_TRUE(torch::allclose(y0.select(1, 0), y.detach().select(1, 0), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(y0.select(1, 1), y.detach().select(1, 1), 1e-3, 1e-3));
}

// bf16 activations (autocast on the CPU): the attention core computes in float32 there (libtorch's
// bf16 flash backward is slow on the CPU) and hands back bf16, close to the float32 result.
TEST(Attention, Bf16InputGivesBf16OutputCloseToFloat32) {
  torch::manual_seed(3);
  auto qkv = torch::randn({2, 24, 3 * 4 * 8});
  auto ref = causal_self_attention(qkv, 4);
  auto low = qkv.to(torch::kBFloat16).requires_grad_(true);
  auto y = causal_self_attention(low, 4);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_LT((y.to(torch::kFloat) - ref).abs().max().item<double>(), 3e-2);
  y.sum().backward();
  EXPECT_EQ(low.grad().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::isfinite(low.grad()).all().item<bool>());
}

}  // namespace
}  // namespace swarm::model
