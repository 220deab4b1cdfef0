// Mixed precision on the CPU: bf16 autocast of a stage against float32, the scope's state
// handling, and the fp16 loss scaler with synthetic gradients. CUDA variants skip without a GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "tests/model/test_util.h"
#include "worker/model/optimizer.h"
#include "worker/model/precision.h"
#include "worker/model/stage.h"

namespace swarm::model {
namespace {

using testing::random_tokens;
using testing::tiny_config;

double rel(const torch::Tensor& err, const torch::Tensor& ref) {
  return (err.to(torch::kDouble).norm() / ref.to(torch::kDouble).norm()).item<double>();
}

TEST(Precision, ParseAndNames) {
  EXPECT_EQ(parse_precision("fp32"), Precision::Float32);
  EXPECT_EQ(parse_precision("bf16"), Precision::BFloat16);
  EXPECT_EQ(parse_precision("fp16"), Precision::Float16);
  EXPECT_EQ(parse_precision("bfloat16"), Precision::BFloat16);
  EXPECT_STREQ(precision_name(Precision::Float16), "fp16");
  EXPECT_EQ(precision_dtype(Precision::BFloat16), torch::kBFloat16);
  EXPECT_EQ(precision_dtype(Precision::Float32), torch::kFloat);
  try {
    parse_precision("int8");
    FAIL() << "int8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp32, bf16 or fp16"), std::string::npos);
  }
  const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 0);
  EXPECT_EQ(pick_precision("auto", cpu), Precision::Float32);
  EXPECT_EQ(pick_precision("auto", gpu), Precision::BFloat16);
  EXPECT_EQ(pick_precision("fp16", gpu), Precision::Float16);
  EXPECT_THROW(pick_precision("half", cpu), std::invalid_argument);
  EXPECT_EQ(effective_precision(cpu, Precision::Float16), Precision::Float32);
  EXPECT_EQ(effective_precision(cpu, Precision::BFloat16), Precision::BFloat16);
  EXPECT_EQ(effective_precision(gpu, Precision::Float16), Precision::Float16);
#ifndef SWARM_MODEL_CUDA
  EXPECT_FALSE(built_with_cuda());
#endif
}

TEST(ComputeScope, SwitchesAndRestoresThreadState) {
  const c10::Device cpu(c10::kCPU);
  auto a = torch::randn({8, 8}), b = torch::randn({8, 8});
  ASSERT_FALSE(autocast_enabled(c10::kCPU));
  const auto before = autocast_dtype(c10::kCPU);
  {
    ComputeScope scope(cpu, Precision::BFloat16);
    EXPECT_TRUE(scope.active());
    EXPECT_TRUE(autocast_enabled(c10::kCPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      ComputeScope off(cpu, Precision::Float32);  // a no-op inside: still autocast
      EXPECT_FALSE(off.active());
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
    {
      ComputeScope nested(cpu, Precision::BFloat16);
      EXPECT_TRUE(autocast_enabled(c10::kCPU));
    }
    EXPECT_TRUE(autocast_enabled(c10::kCPU));  // the outer scope is still on
  }
  EXPECT_FALSE(autocast_enabled(c10::kCPU));
  EXPECT_EQ(autocast_dtype(c10::kCPU), before);
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  {
    ComputeScope fp16_on_cpu(cpu, Precision::Float16);  // unsupported on the CPU: float32
    EXPECT_FALSE(fp16_on_cpu.active());
    EXPECT_EQ(fp16_on_cpu.precision(), Precision::Float32);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  }
}

// Error bound. bf16 keeps 8 significant bits: unit roundoff u = 2^-8 ~ 3.9e-3. Under autocast
// every matmul operand is rounded once (relative error <= u each, ~u/sqrt(3) RMS) and products
// accumulate in float32, so one matmul's output carries ~u relative RMS error; a block chains
// 4 matmuls (qkv, scores/att.v, proj, fc1/fc2) and the stage 2 blocks, errors adding roughly in
// quadrature: ~sqrt(8)*u ~ 1.1e-2 on what the blocks compute. The residual stream itself stays
// float32, so the error is measured against the change a middle stage makes (out - in), not the
// output (which would hide it). The backward's matmuls take bf16 operands too (saved bf16
// activations, bf16 weight copies), so gradients carry the same order of error. Measured here:
// ~u (4e-3 to 7e-3) for outputs and every gradient. Bounds: 4e-2 (~10 u) for outputs and
// gradients; 2e-3 for the loss, a mean over 4 x 16 token losses whose rounding errors average out
// (measured ~1e-5).
TEST(ComputeScope, Bf16StageForwardCloseToFloat32AndGradientsFlow) {
  const auto config = tiny_config(3);
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
    out.backward(g);  // outside the scope, as a worker does
    std::vector<torch::Tensor> grads;
    for (auto& prm : stage->parameters()) grads.push_back(prm.grad().clone());
    return std::make_tuple(out.detach(), in.grad().clone(), grads);
  };
  auto [y32, gx32, gp32] = run(Precision::Float32);
  auto [y16, gx16, gp16] = run(Precision::BFloat16);

  EXPECT_EQ(y16.scalar_type(), torch::kFloat);  // residual stream stays float32 on the wire
  const double out_err = rel(y16 - y32, y32 - x);
  EXPECT_GT(out_err, 0.0) << "autocast had no effect";
  EXPECT_LT(out_err, 4e-2);
  EXPECT_EQ(gx16.scalar_type(), torch::kFloat);
  EXPECT_LT(rel(gx16 - gx32, gx32 - g), 4e-2);
  ASSERT_EQ(gp16.size(), gp32.size());
  for (size_t i = 0; i < gp16.size(); ++i) {
    EXPECT_EQ(gp16[i].scalar_type(), torch::kFloat) << "master weights are float32";
    EXPECT_TRUE(torch::isfinite(gp16[i]).all().item<bool>());
    EXPECT_GT(gp16[i].abs().sum().item<double>(), 0.0) << "parameter " << i << " got no gradient";
    EXPECT_LT(rel(gp16[i] - gp32[i], gp32[i]), 4e-2) << "parameter " << i;
  }
  for (auto& prm : stage->parameters()) EXPECT_EQ(prm.scalar_type(), torch::kFloat);
}

TEST(ComputeScope, Bf16LastStageLossCloseToFloat32) {
  const auto config = tiny_config(2);
  const c10::Device cpu(c10::kCPU);
  auto stage = make_stage(config, 1, 3);
  auto gen = at::detail::createCPUGenerator(9);
  auto x = torch::randn({4, config.sequence_length, config.hidden_size}, gen);
  auto targets = random_tokens(config, 4, config.sequence_length, 10);
  auto loss_at = [&](Precision p) {
    torch::Tensor logits;
    {
      ComputeScope scope(cpu, p);
      logits = stage->forward(x);
    }
    return std::make_pair(logits, stage->loss(logits, targets));  // loss outside the scope
  };
  auto [l32, loss32] = loss_at(Precision::Float32);
  auto [l16, loss16] = loss_at(Precision::BFloat16);
  EXPECT_EQ(loss16.scalar_type(), torch::kFloat);
  EXPECT_LT(rel(l16.to(torch::kFloat) - l32, l32), 4e-2);
  EXPECT_NEAR(loss16.item<double>(), loss32.item<double>(), 2e-3 * loss32.item<double>());
}

TEST(ComputeScope, CudaBf16AndFp16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::Device gpu(c10::kCUDA, 0);
  const auto config = tiny_config(3);
  auto stage = make_stage(config, 1, 5);
  stage->to(gpu);
  auto x = torch::randn({4, config.sequence_length, config.hidden_size}, gpu);
  auto y32 = stage->forward(x).detach();
  for (auto p : {Precision::BFloat16, Precision::Float16}) {
    torch::Tensor y;
    {
      ComputeScope scope(gpu, p);
      EXPECT_TRUE(scope.active());
      EXPECT_TRUE(autocast_enabled(c10::kCUDA));
      y = stage->forward(x);
    }
    EXPECT_FALSE(autocast_enabled(c10::kCUDA));
    y.sum().backward();
    EXPECT_LT(rel(y.detach().to(torch::kFloat) - y32, y32 - x), 4e-2) << precision_name(p);
  }
}

// ---- LossScaler ----

TEST(LossScaler, GrowsAfterIntervalAndBacksOffOnInf) {
  LossScalerConfig c;
  c.init_scale = 1024;
  c.growth_interval = 3;
  c.max_scale = 4096;
  c.min_scale = 256;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.good_steps(), 0);
  for (int i = 0; i < 9; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 4096);  // clamped at max_scale
  s.update(false);
  s.update(true);
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.good_steps(), 0);  // an inf resets the growth count
  for (int i = 0; i < 5; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 256);  // clamped at min_scale
  EXPECT_EQ(s.skipped_steps(), 6);

  for (auto bad : {0.0, -1.0}) {
    LossScalerConfig b;
    b.init_scale = bad;
    EXPECT_THROW(LossScaler{b}, std::invalid_argument);
  }
  LossScalerConfig b;
  b.backoff_factor = 1.0;
  EXPECT_THROW(LossScaler{b}, std::invalid_argument);
  b = LossScalerConfig{};
  b.growth_factor = 1.0;
  EXPECT_THROW(LossScaler{b}, std::invalid_argument);
}

TEST(LossScaler, ScalingRescuesFp16GradientsAndUnscalesExactly) {
  LossScaler s;  // 2^16
  // A gradient of 1e-8 underflows to 0 in fp16 (smallest subnormal ~6e-8) unless scaled.
  auto tiny = torch::full({4}, 1e-8, torch::kFloat);
  EXPECT_EQ(tiny.to(torch::kHalf).to(torch::kFloat).abs().max().item<float>(), 0.0f);
  auto scaled = s.scale_grad(tiny).to(torch::kHalf).to(torch::kFloat);
  std::vector<torch::Tensor> grads{scaled};
  s.unscale_(grads);
  EXPECT_NEAR(grads[0][0].item<double>(), 1e-8, 1e-3 * 1e-8);
  // Powers of two scale and unscale exactly.
  auto g = torch::randn({100});
  auto round = s.unscale_grad(s.scale_grad(g));
  EXPECT_TRUE(torch::equal(round, g));
  EXPECT_DOUBLE_EQ(s.scale_loss(torch::tensor(0.5)).item<double>(), 0.5 * 65536);
}

TEST(LossScaler, AllFiniteDetectsInfAndNan) {
  auto ok = torch::ones({3});
  EXPECT_TRUE(LossScaler::all_finite({ok, torch::Tensor(), torch::zeros({0})}));
  EXPECT_TRUE(LossScaler::all_finite({}));
  auto inf = torch::ones({3});
  inf[1] = std::numeric_limits<float>::infinity();
  auto nan = torch::ones({2, 2});
  nan[1][0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(LossScaler::all_finite({ok, inf}));
  EXPECT_FALSE(LossScaler::all_finite({nan}));
}

// step(): scaled synthetic gradients give exactly the parameters an unscaled step gives; an inf
// anywhere skips the update (parameters unchanged, the step still counted) and halves the scale.
TEST(LossScaler, StepAppliesUnscaledOrSkips) {
  const auto config = tiny_config(2);
  auto a = make_stage(config, 0, 1), b = make_stage(config, 0, 1);
  OptimizerConfig oc;
  StageOptimizer oa(*a, oc), ob(*b, oc);
  LossScaler s;
  auto gen = at::detail::createCPUGenerator(3);
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto g = torch::randn(pa[i].sizes(), gen) * 1e-3;
    pa[i].mutable_grad() = s.scale_grad(g);
    pb[i].mutable_grad() = g.clone();
  }
  EXPECT_TRUE(s.step(*a, oa));
  ob.step();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
  EXPECT_EQ(s.scale(), 65536);

  std::vector<torch::Tensor> before;
  for (auto& p : pa) {
    before.push_back(p.detach().clone());
    p.mutable_grad() = torch::ones_like(p);
  }
  pa[2].mutable_grad()[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(s.step(*a, oa));
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], before[i])) << i;
  EXPECT_EQ(oa.step_count(), 2);
  EXPECT_EQ(oa.skipped_steps(), 1);
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.skipped_steps(), 1);
}

}  // namespace
}  // namespace swarm::model
