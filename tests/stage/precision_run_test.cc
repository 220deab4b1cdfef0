// spec.workers.precision in the worker runtime, on the CPU: a bf16 swarm trains like a float32
// one; fp16 loss scaling (forced here: fp16 itself computes in fp32 on a CPU) leaves the same
// training, and an overflowing scale makes every peer of a stage skip the same steps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <iostream>

#include "tests/stage/swarm_fixture.h"
#include "worker/trainer/trainer.h"

namespace swarm {
namespace {

// An in-process swarm whose workers' options can be adjusted, trained by one trainer.
struct PrecisionSwarm : testing::LocalSwarm {
  using LocalSwarm::LocalSwarm;
  runtime::TrainerReport train(int64_t steps) {
    runtime::TrainerOptions t;
    t.spec = spec;
    t.peer_id = "trainer0";
    t.registry_url = registry->url();
    t.secret = testing::kSecret;
    t.max_steps = steps;
    t.eval_batches = 2;
    t.wait_for_peers_seconds = 20;
    std::atomic<bool> stop{false};
    return runtime::Trainer(t).run(stop);
  }
};

JobSpec job(const std::string& precision, int64_t steps) {
  auto spec = testing::tiny_job(2, steps);
  spec.training.optimizer.learning_rate = 0.01;
  spec.workers.device = "cpu";
  spec.workers.precision = precision;
  return spec;
}

TEST(WorkerPrecision, Bf16SwarmTrainsAndAgreesWithFloat32) {
  torch::set_num_threads(1);
  constexpr int64_t kSteps = 12;
  runtime::TrainerReport fp32, bf16;
  {
    PrecisionSwarm swarm(job("auto", kSteps), 1, nullptr);  // auto on the CPU = fp32
    EXPECT_EQ(swarm.workers[0]->status().precision, "fp32 on cpu");
    fp32 = swarm.train(kSteps);
  }
  {
    PrecisionSwarm swarm(job("bf16", kSteps), 1, nullptr);
    for (auto& w : swarm.workers) EXPECT_EQ(w->status().precision, "bf16 on cpu");
    bf16 = swarm.train(kSteps);
    // Activations and gradients on the wire stay float32 (a bf16 one would be refused by the
    // next stage's input check and show up as lost microbatches); on the CPU nothing needs host
    // staging, so the pool never grows.
    for (auto& w : swarm.workers) {
      auto st = w->status();
      EXPECT_EQ(st.staging_allocations, 0);
      EXPECT_EQ(st.loss_scale, 0.0);
    }
  }
  ASSERT_TRUE(fp32.finished);
  ASSERT_TRUE(bf16.finished);
  for (auto* r : {&fp32, &bf16})
    std::cout << (r == &fp32 ? "fp32" : "bf16") << ": loss_first " << r->loss_first << " loss_last "
              << r->loss_last << " eval_loss " << r->eval_loss << " samples/s " << r->samples_per_second
              << "\n";
  EXPECT_EQ(bf16.microbatches_lost, 0);
  EXPECT_EQ(bf16.requests_retried, 0);
  EXPECT_LT(bf16.loss_last, bf16.loss_first - 0.5) << bf16.to_json().dump();
  EXPECT_LT(fp32.loss_last, fp32.loss_first - 0.5) << fp32.to_json().dump();
  // Same data and initialization: the bf16 run follows the float32 one closely.
  EXPECT_NEAR(bf16.loss_first, fp32.loss_first, 0.05 * fp32.loss_first);
  EXPECT_NEAR(bf16.eval_loss, fp32.eval_loss, 0.05 * fp32.eval_loss)
      << "fp32 " << fp32.to_json().dump() << "\nbf16 " << bf16.to_json().dump();
}

// fp16 loss scaling with two peers per stage: what the peers average is unscaled (scales are
// powers of two, so scaling is exact), both peers of a stage end identical, and the loss falls as
// in float32.
TEST(WorkerPrecision, Fp16LossScalingKeepsPeersIdenticalAndTrains) {
  torch::set_num_threads(1);
  constexpr int64_t kSteps = 8;
  PrecisionSwarm swarm(job("fp16", kSteps), 2,
                       [](runtime::WorkerOptions& o) { o.force_loss_scaling = true; });
  EXPECT_EQ(swarm.workers[0]->status().precision, "fp16 (fp32 on cpu), loss scale 65536");
  auto report = swarm.train(kSteps);
  ASSERT_TRUE(report.finished);
  EXPECT_EQ(report.microbatches_lost, 0);
  EXPECT_LT(report.loss_last, report.loss_first - 0.3) << report.to_json().dump();
  for (int stage = 0; stage < 2; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    auto a = swarm.workers[2 * stage]->status();
    auto b = swarm.workers[2 * stage + 1]->status();
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.fingerprint, b.fingerprint);
    EXPECT_EQ(a.loss_scale, 65536.0);
    EXPECT_EQ(a.skipped_steps, 0);
    EXPECT_EQ(b.skipped_steps, 0);
  }
}

// A scale that overflows float32 in the backward: every peer of a stage skips the same steps
// (decided on the averaged gradient), backs off to the same scale, stays identical, and once the
// scale fits training proceeds.
TEST(WorkerPrecision, Fp16OverflowIsSkippedAlikeByThePeersOfAStage) {
  torch::set_num_threads(1);
  constexpr int64_t kSteps = 14;
  PrecisionSwarm swarm(job("fp16", kSteps), 2, [](runtime::WorkerOptions& o) {
    o.force_loss_scaling = true;
    o.initial_loss_scale = std::ldexp(1.0, 126);
  });
  auto report = swarm.train(kSteps);
  ASSERT_TRUE(report.finished);
  EXPECT_EQ(report.microbatches_lost, 0);
  for (int stage = 0; stage < 2; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    auto a = swarm.workers[2 * stage]->status();
    auto b = swarm.workers[2 * stage + 1]->status();
    std::cout << "stage " << stage << ": steps " << a.step << " skipped " << a.skipped_steps << "/"
              << b.skipped_steps << " scale " << a.loss_scale << "/" << b.loss_scale << "\n";
    EXPECT_EQ(a.step, b.step);
    EXPECT_GE(a.skipped_steps, 1) << "the initial scale must overflow";
    EXPECT_EQ(a.skipped_steps, b.skipped_steps);
    EXPECT_EQ(a.loss_scale, b.loss_scale);
    EXPECT_LT(a.loss_scale, std::ldexp(1.0, 126));
    EXPECT_LT(a.skipped_steps, a.step) << "training never resumed";
    EXPECT_EQ(a.fingerprint, b.fingerprint);
    // /metrics tells the same: the skipped steps and the scale they backed off to.
    const auto text = testing::scrape_metrics(swarm.workers[2 * stage]->metrics_port());
    EXPECT_EQ(testing::metric_sample(text, "swarm_optimizer_skipped_steps_total"), a.skipped_steps) << text;
    // (the exposition writes 16 significant digits: equal to within a few ulps)
    EXPECT_DOUBLE_EQ(testing::metric_sample(text, "swarm_loss_scale"), a.loss_scale) << text;
  }
  std::cout << "loss_first " << report.loss_first << " loss_last " << report.loss_last << "\n";
  EXPECT_LT(report.loss_last, report.loss_first) << report.to_json().dump();
}

}  // namespace
}  // namespace swarm
