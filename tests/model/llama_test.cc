// The llama pieces (worker/model/llama.h, attention.h) against their definitions: grouped-query
// attention, rotary embeddings in Hugging Face's rotate-half layout (and Llama 3's scaling of their
// frequencies), RMSNorm, and a llama stage under bf16 autocast.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tests/model/test_util.h"
#include "worker/model/attention.h"
#include "worker/model/fused_cpu.h"
#include "worker/model/llama.h"
#include "worker/model/precision.h"
#include "worker/model/stage.h"

namespace swarm::model {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// 6 query heads over 2 k/v heads: the fused kernel's enable_gqa is the explicit form with each
// k/v head repeated for its 3 query heads (query head h reads k/v head h / 3), values and
// gradients.
TEST(Llama, GroupedQueryAttentionMatchesRepeatedHeads) {
  torch::manual_seed(11);
  const int64_t B = 2, T = 29, nh = 6, nkv = 2, hd = 8;
  auto q = torch::randn({B, nh, T, hd}).requires_grad_(true);
  auto k = torch::randn({B, nkv, T, hd}).requires_grad_(true);
  auto v = torch::randn({B, nkv, T, hd}).requires_grad_(true);
  auto y = causal_attention(q, k, v);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{B, T, nh * hd}));
  // By hand: query head h against k/v head h / 3, one head at a time.
  auto qr = q.detach().clone().requires_grad_(true), kr = k.detach().clone().requires_grad_(true),
       vr = v.detach().clone().requires_grad_(true);
  std::vector<torch::Tensor> heads;
  for (int64_t h = 0; h < nh; ++h) {
    heads.push_back(explicit_causal_attention(qr.narrow(1, h, 1), kr.narrow(1, h / 3, 1), vr.narrow(1, h / 3, 1)));
  }
  auto y_ref = torch::cat(heads, -1);
  EXPECT_LT(max_abs_diff(y, y_ref), 2e-5);
  auto g = torch::randn(y.sizes());
  y.backward(g);
  y_ref.backward(g);
  EXPECT_LT(max_abs_diff(q.grad(), qr.grad()), 2e-5);
  EXPECT_LT(max_abs_diff(k.grad(), kr.grad()), 2e-5);
  EXPECT_LT(max_abs_diff(v.grad(), vr.grad()), 2e-5);
  // explicit_causal_attention's own grouping agrees too.
  EXPECT_LT(max_abs_diff(explicit_causal_attention(q, k, v), y), 2e-5);
}

// Rotate-half: value i < d/2 pairs with i + d/2 and turns by angle p * theta^(-2i/d), in double.
TEST(Llama, RotaryIsHuggingFacesRotateHalf) {
  LlamaParams p;
  p.head_dim = 8;
  p.rope_theta = 10000;
  const int64_t T = 7, d = 8;
  torch::manual_seed(2);
  auto x = torch::randn({1, T, 1, d}, torch::kDouble);
  auto want = x.clone();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = static_cast<double>(t) * std::pow(10000.0, -2.0 * static_cast<double>(i) / d);
      const double a = x[0][t][0][i].item<double>(), b = x[0][t][0][i + d / 2].item<double>();
      want[0][t][0][i] = a * std::cos(angle) - b * std::sin(angle);
      want[0][t][0][i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
    }
  }
  const auto rope = rotary_tables(p, T, torch::kCPU);
  // The fused float32 kernel and the composite form (here in double).
  const auto fused = apply_rotary(x.to(torch::kFloat), rope);
  const auto composite = apply_rotary(x, {rope.cos.to(torch::kDouble), rope.sin.to(torch::kDouble)});
  EXPECT_LT(max_abs_diff(fused, want), 1e-5);
  EXPECT_LT(max_abs_diff(composite, want), 1e-5);
  // Position 0 is not turned.
  EXPECT_LT(max_abs_diff(fused[0][0], x[0][0]), 1e-7);
}

// What rotary embeddings are for: q.k depends on the positions only through their difference.
TEST(Llama, RotaryScoresDependOnRelativePositionOnly) {
  LlamaParams p;
  p.head_dim = 16;
  torch::manual_seed(4);
  const auto rope = rotary_tables(p, 20, torch::kCPU);
  auto q = torch::randn({16}), k = torch::randn({16});
  auto at = [&](const torch::Tensor& v, int64_t pos) {
    return apply_rotary(v.view({1, 1, 1, 16}), {rope.cos.narrow(0, pos, 1), rope.sin.narrow(0, pos, 1)}).flatten();
  };
  const double s_3_1 = at(q, 3).dot(at(k, 1)).item<double>();
  const double s_12_10 = at(q, 12).dot(at(k, 10)).item<double>();
  const double s_12_9 = at(q, 12).dot(at(k, 9)).item<double>();
  EXPECT_NEAR(s_3_1, s_12_10, 1e-4);
  EXPECT_GT(std::abs(s_12_9 - s_12_10), 1e-3);
}

// Llama 3 scaling (transformers' _compute_llama3_parameters): wavelengths below
// original / high_freq_factor keep their frequency, above original / low_freq_factor are divided by
// factor, in between interpolated.
TEST(Llama, Llama3ScalingKeepsHighDividesLowAndBlendsTheMiddle) {
  LlamaParams p;
  p.head_dim = 64;
  p.rope_theta = 500000;
  const auto plain = rotary_inv_freq(p).to(torch::kDouble);
  p.rope_scaling = {8.0, 1.0, 4.0, 8192};
  const auto scaled = rotary_inv_freq(p).to(torch::kDouble);
  int high = 0, low = 0, middle = 0;
  for (int64_t i = 0; i < 32; ++i) {
    const double f = plain[i].item<double>(), s = scaled[i].item<double>();
    const double wavelen = 2 * M_PI / f;
    if (wavelen < 8192.0 / 4) {
      EXPECT_NEAR(s, f, 1e-6 * f) << i;
      ++high;
    } else if (wavelen > 8192.0) {
      EXPECT_NEAR(s, f / 8, 1e-6 * f) << i;
      ++low;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      EXPECT_NEAR(s, (1 - smooth) * f / 8 + smooth * f, 1e-5 * f) << i;
      ++middle;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(middle, 0);
}

// The fused CPU kernels (fused_cpu.h) against the composite forms computed in double: values and
// gradients, on a strided input as the projections hand it over.
TEST(Llama, FusedKernelsMatchTheCompositeForms) {
  torch::manual_seed(6);
  auto check = [](const char* what, const torch::Tensor& a, const torch::Tensor& b) {
    EXPECT_LT(max_abs_diff(a, b), 2e-5) << what;
  };
  {  // RMSNorm
    auto x = torch::randn({3, 7, 24}).requires_grad_(true), w = torch::randn({24}).requires_grad_(true);
    auto xd = x.detach().to(torch::kDouble).requires_grad_(true), wd = w.detach().to(torch::kDouble).requires_grad_(true);
    auto y = rms_norm(x, w, 1e-5), yd = rms_norm(xd, wd, 1e-5);
    check("rms_norm", y, yd);
    auto g = torch::randn(y.sizes());
    y.backward(g);
    yd.backward(g.to(torch::kDouble));
    check("rms_norm dx", x.grad(), xd.grad());
    check("rms_norm dw", w.grad(), wd.grad());
  }
  {  // rotary, on a slice of a wider row (strides of a fused q/k/v output)
    LlamaParams p;
    p.head_dim = 8;
    const auto rope = rotary_tables(p, 5, torch::kCPU);
    auto wide = torch::randn({2, 5, 40}).requires_grad_(true);
    auto wide_d = wide.detach().to(torch::kDouble).requires_grad_(true);
    auto y = apply_rotary(wide.narrow(-1, 8, 24).view({2, 5, 3, 8}), rope);
    auto yd = apply_rotary(wide_d.narrow(-1, 8, 24).view({2, 5, 3, 8}),
                           {rope.cos.to(torch::kDouble), rope.sin.to(torch::kDouble)});
    check("rotary", y, yd);
    auto g = torch::randn(y.sizes());
    y.backward(g);
    yd.backward(g.to(torch::kDouble));
    check("rotary dx", wide.grad(), wide_d.grad());
  }
  {  // SwiGLU
    auto gu = torch::randn({4, 6, 20}).requires_grad_(true);
    auto gu_d = gu.detach().to(torch::kDouble).requires_grad_(true);
    auto y = swiglu_fused(gu);
    auto parts = gu_d.chunk(2, -1);
    auto yd = torch::silu(parts[0]) * parts[1];
    check("swiglu", y, yd);
    auto g = torch::randn(y.sizes());
    y.backward(g);
    yd.backward(g.to(torch::kDouble));
    check("swiglu dx", gu.grad(), gu_d.grad());
  }
  EXPECT_THROW(swiglu_fused(torch::randn({2, 4}, torch::kDouble)), std::invalid_argument);
}

TEST(Llama, RmsNorm) {
  torch::manual_seed(5);
  auto x = torch::randn({3, 5, 16}), w = torch::randn({16});
  auto want = x / torch::sqrt(x.pow(2).mean(-1, true) + 1e-6) * w;
  EXPECT_LT(max_abs_diff(rms_norm(x, w, 1e-6), want), 1e-5);
  EXPECT_EQ(rms_norm(x.to(torch::kBFloat16), w, 1e-6).scalar_type(), torch::kFloat);  // weight float32: promoted
}

// A middle llama stage under bf16 autocast: close to float32 in outputs and every gradient
// (bounds and reasoning: precision_test.cc, Bf16StageForwardCloseToFloat32AndGradientsFlow).
TEST(Llama, Bf16StageCloseToFloat32) {
  const auto config = testing::tiny_llama_config(3);
  const c10::Device cpu(c10::kCPU);
  auto stage = make_stage(config, 1, 5);
  auto gen = at::detail::createCPUGenerator(7);
  auto x = torch::randn({4, config.sequence_length, config.hidden_size}, gen);
  auto g = torch::randn({4, config.sequence_length, config.hidden_size}, gen);
  auto run = [&](Precision p) {
    stage->zero_grad();
    auto in = x.clone().requires_grad_(true);
    torch::Tensor out;
    {
      ComputeScope scope(cpu, p);
      out = stage->forward(in);
    }
    out.backward(g);
    std::vector<torch::Tensor> grads;
    for (auto& prm : stage->parameters()) grads.push_back(prm.grad().clone());
    return std::make_tuple(out.detach(), in.grad().clone(), grads);
  };
  auto [y32, gx32, gp32] = run(Precision::Float32);
  auto [y16, gx16, gp16] = run(Precision::BFloat16);
  auto rel = [](const torch::Tensor& err, const torch::Tensor& ref) {
    return (err.to(torch::kDouble).norm() / ref.to(torch::kDouble).norm()).item<double>();
  };
  EXPECT_EQ(y16.scalar_type(), torch::kFloat);
  const double out_err = rel(y16 - y32, y32 - x);
  EXPECT_GT(out_err, 0.0) << "autocast had no effect";
  EXPECT_LT(out_err, 4e-2);
  EXPECT_LT(rel(gx16 - gx32, gx32 - g), 4e-2);
  ASSERT_EQ(gp16.size(), gp32.size());
  for (size_t i = 0; i < gp16.size(); ++i) {
    EXPECT_EQ(gp16[i].scalar_type(), torch::kFloat);
    EXPECT_GT(gp16[i].abs().sum().item<double>(), 0.0) << "parameter " << i << " got no gradient";
    EXPECT_LT(rel(gp16[i] - gp32[i], gp32[i]), 4e-2) << "parameter " << i;
  }
}

}  // namespace
}  // namespace swarm::model
