// StageCompute: a worker's device path (staging, autocast around the forward, fp16 loss scaling
// with unscaled gradients, the scale's update after a step). CPU runs here; the CUDA test skips
// without a GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "tests/model/test_util.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/stage_compute.h"
#include "worker/model/state.h"

namespace swarm::model {
namespace {

using testing::random_tokens;
using testing::tiny_config;

const c10::Device kCpu(c10::kCPU);

std::vector<torch::Tensor> grads_of(StageModel& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return out;
}

TEST(StageCompute, ResolvesPrecisionPerDevice) {
  StageCompute bf16(kCpu, Precision::BFloat16);
  EXPECT_EQ(bf16.precision(), Precision::BFloat16);
  EXPECT_FALSE(bf16.loss_scaling());
  EXPECT_EQ(bf16.describe(), "bf16 on cpu");
  StageCompute fp16(kCpu, Precision::Float16);  // fp16 autocast is CUDA only
  EXPECT_EQ(fp16.precision(), Precision::Float32);
  EXPECT_FALSE(fp16.loss_scaling());
  EXPECT_EQ(fp16.describe(), "fp16 (fp32 on cpu)");
  StageComputeOptions forced;
  forced.force_loss_scaling = true;
  EXPECT_TRUE(StageCompute(kCpu, Precision::Float16, forced).loss_scaling());
  EXPECT_FALSE(StageCompute(kCpu, Precision::BFloat16, forced).loss_scaling());
}

TEST(StageCompute, Bf16ForwardBackwardKeepsFloat32MastersAndWire) {
  const auto config = tiny_config(3);
  auto stage = make_stage(config, 1, 5);
  StageCompute compute(kCpu, Precision::BFloat16);
  auto gen = at::detail::createCPUGenerator(3);
  auto x = compute.to_device(torch::randn({2, config.sequence_length, config.hidden_size}, gen));
  auto in = x.detach().requires_grad_(true);
  auto out = compute.forward(*stage, in);
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU)) << "the scope covers the forward only";
  compute.backward(*stage, out, torch::ones_like(out), in);
  auto wire_out = compute.to_host(out);
  auto wire_grad = compute.to_host(in.grad());
  EXPECT_EQ(wire_out.scalar_type(), torch::kFloat);
  EXPECT_EQ(wire_grad.scalar_type(), torch::kFloat);
  EXPECT_TRUE(wire_out.is_contiguous());
  for (auto& p : stage->parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  }
}

// A bf16 result bound for the float32 wire is converted into a pooled buffer: after the first
// request of a shape the pool hands the same buffer out again (no allocation per request). A
// float32 CPU tensor needs no copy at all.
TEST(StageCompute, WireConversionReusesStagingBuffers) {
  StageCompute compute(kCpu, Precision::BFloat16);
  const void* first = nullptr;
  for (int i = 0; i < 20; ++i) {
    auto result = torch::full({4, 16, 32}, 0.5 + i, torch::kBFloat16);
    auto host = compute.to_host(result);
    EXPECT_EQ(host.scalar_type(), torch::kFloat);
    EXPECT_EQ(host[3][15][31].item<float>(), 0.5f + i);
    if (i == 0) first = host.data_ptr();
    EXPECT_EQ(host.data_ptr(), first) << "request " << i;
    // host (the frame's tensor) is dropped here, as after the reply was written
  }
  auto st = compute.staging_stats();
  EXPECT_EQ(st.allocations, 1);
  EXPECT_EQ(st.reuses, 19);
  EXPECT_EQ(st.buffers, 1u);
  auto f32 = torch::ones({4, 16, 32});
  EXPECT_EQ(compute.to_host(f32).data_ptr(), f32.data_ptr());
  EXPECT_EQ(compute.staging_stats().allocations, 1);
}

// Loss scaling by a power of two is exact: the unscaled gradients (parameters and the input
// gradient sent upstream) equal those of an unscaled backward, for a middle and a last stage.
TEST(StageCompute, ScaledBackwardLeavesUnscaledGradients) {
  const auto config = tiny_config(3);
  StageComputeOptions forced;
  forced.force_loss_scaling = true;
  StageCompute plain(kCpu, Precision::Float32);
  StageCompute scaled(kCpu, Precision::Float16, forced);
  ASSERT_TRUE(scaled.loss_scaling());
  EXPECT_EQ(scaled.scaler().scale(), 65536.0);
  auto gen = at::detail::createCPUGenerator(11);
  auto x = torch::randn({3, config.sequence_length, config.hidden_size}, gen);
  auto g = torch::randn({3, config.sequence_length, config.hidden_size}, gen);
  auto targets = random_tokens(config, 3, config.sequence_length, 4);

  for (int64_t s : {1, 2}) {
    SCOPED_TRACE(s);
    auto stage = make_stage(config, s, 9);
    auto run = [&](StageCompute& c) {
      stage->zero_grad();
      auto in = x.clone().requires_grad_(true);
      auto out = c.forward(*stage, in);
      if (stage->is_last()) c.backward_loss(*stage, stage->loss(out, targets) * 3.0, in);
      else c.backward(*stage, out, g, in);
      return std::make_pair(in.grad().clone(), grads_of(*stage));
    };
    auto [gx_plain, gp_plain] = run(plain);
    auto [gx_scaled, gp_scaled] = run(scaled);
    EXPECT_TRUE(torch::equal(gx_plain, gx_scaled));
    ASSERT_EQ(gp_plain.size(), gp_scaled.size());
    for (size_t i = 0; i < gp_plain.size(); ++i) EXPECT_TRUE(torch::equal(gp_plain[i], gp_scaled[i])) << i;
    // Two backwards accumulate, still unscaled; no hook is left behind.
    auto in = x.clone().requires_grad_(true);
    auto out = scaled.forward(*stage, in);
    if (stage->is_last()) scaled.backward_loss(*stage, stage->loss(out, targets) * 3.0, in);
    else scaled.backward(*stage, out, g, in);
    auto params = stage->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(torch::allclose(params[i].grad(), 2 * gp_plain[i], 1e-5, 1e-7)) << i;
    stage->zero_grad();
    auto in2 = x.clone().requires_grad_(true);
    auto out2 = plain.forward(*stage, in2);
    if (stage->is_last()) plain.backward_loss(*stage, stage->loss(out2, targets) * 3.0, in2);
    else plain.backward(*stage, out2, g, in2);
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i].grad(), gp_plain[i])) << i;
  }
}

// Two peers of a stage with different scales: one overflows. Their summed (averaged) gradient has
// the inf, so both optimizers skip the same step, leave the parameters alone and back off the
// scale; the next step with finite gradients applies on both.
TEST(StageCompute, OverflowSkipsTheStepOnEveryPeerOfTheStage) {
  const auto config = tiny_config(3);
  StageComputeOptions opts;
  opts.force_loss_scaling = true;
  opts.scaler.max_scale = 1e38;
  opts.scaler.init_scale = std::ldexp(1.0, 126);  // float32 overflows in the backward
  StageComputeOptions low = opts;
  low.scaler.init_scale = 65536.0;
  OptimizerConfig oc;
  oc.lr = 1e-2;

  struct Peer {
    std::shared_ptr<StageModel> model;
    std::unique_ptr<StageOptimizer> optimizer;
    std::unique_ptr<StageCompute> compute;
  };
  std::vector<Peer> peers;
  for (const auto* o : {&opts, &low}) {
    Peer p;
    p.model = make_stage(config, 1, 21);
    p.optimizer = std::make_unique<StageOptimizer>(*p.model, oc);
    p.compute = std::make_unique<StageCompute>(kCpu, Precision::Float16, *o);
    peers.push_back(std::move(p));
  }
  auto gen = at::detail::createCPUGenerator(5);
  auto x = torch::randn({2, config.sequence_length, config.hidden_size}, gen);
  auto g = torch::randn({2, config.sequence_length, config.hidden_size}, gen) * 1e3;
  const uint64_t before = param_fingerprint(*peers[0].model);
  ASSERT_EQ(before, param_fingerprint(*peers[1].model));

  auto step = [&](bool expect_skip) {
    std::vector<torch::Tensor> flats;
    for (auto& p : peers) {
      auto in = x.clone().requires_grad_(true);
      auto out = p.compute->forward(*p.model, in);
      p.compute->backward(*p.model, out, g, in);
      flats.push_back(flatten(grads_of(*p.model)));
    }
    EXPECT_EQ(expect_skip, !torch::isfinite(flats[0]).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(flats[1]).all().item<bool>());
    auto sum = flats[0] + flats[1];  // what the step's leader answers every member
    for (auto& p : peers) {
      std::vector<torch::Tensor> live;
      for (auto& prm : p.model->parameters()) live.push_back(prm.mutable_grad());
      unflatten_into(sum / 2.0, live);
      const int64_t skipped = p.optimizer->skipped_steps();
      p.optimizer->step();
      p.compute->after_step(p.optimizer->skipped_steps() > skipped);
    }
  };
  step(/*expect_skip=*/true);
  for (auto& p : peers) {
    EXPECT_EQ(p.optimizer->skipped_steps(), 1);
    EXPECT_EQ(p.optimizer->step_count(), 1);
    EXPECT_EQ(p.compute->scaler().skipped_steps(), 1);
    EXPECT_EQ(param_fingerprint(*p.model), before);
  }
  EXPECT_EQ(peers[0].compute->scaler().scale(), std::ldexp(1.0, 125));
  EXPECT_EQ(peers[1].compute->scaler().scale(), 32768.0);
  // The backed-off scale of peer 0 still overflows here; shrink it as repeated skips would.
  peers[0].compute->scaler().set_scale(1024.0);
  step(/*expect_skip=*/false);
  EXPECT_NE(param_fingerprint(*peers[0].model), before);
  EXPECT_EQ(param_fingerprint(*peers[0].model), param_fingerprint(*peers[1].model));
  for (auto& p : peers) EXPECT_EQ(p.compute->scaler().good_steps(), 1);
}

TEST(StageCompute, CudaPathUsesPooledPinnedBuffers) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto config = tiny_config(3);
  const c10::Device cuda(c10::kCUDA, 0);
  auto stage = make_stage(config, 1, 5);
  stage->to(cuda);
  StageCompute compute(cuda, Precision::BFloat16);
  EXPECT_TRUE(compute.staging().pinned());
  auto gen = at::detail::createCPUGenerator(3);
  auto x = torch::randn({2, config.sequence_length, config.hidden_size}, gen);
  for (int i = 0; i < 10; ++i) {
    auto in = compute.to_device(x).detach().requires_grad_(true);
    auto out = compute.forward(*stage, in);
    compute.backward(*stage, out, x, in);
    auto host_out = compute.to_host(out);
    auto host_grad = compute.to_host(in.grad());
    EXPECT_EQ(host_out.scalar_type(), torch::kFloat);
    EXPECT_TRUE(host_out.is_pinned());
    EXPECT_TRUE(torch::isfinite(host_grad).all().item<bool>());
  }
  auto st = compute.staging_stats();
  EXPECT_LE(st.allocations, 4) << "the pool grows only during warm-up";
  EXPECT_GE(st.reuses, 20);
}

}  // namespace
}  // namespace swarm::model
