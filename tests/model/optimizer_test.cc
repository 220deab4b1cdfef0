#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tests/model/test_util.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"

namespace swarm::model {
namespace {

using testing::random_tokens;
using testing::tiny_config;

TEST(LrSchedule, WarmupThenDecay) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.warmup_steps = 10;
  c.max_steps = 110;
  c.min_lr_ratio = 0.1;

  c.schedule = OptimizerConfig::Constant;
  EXPECT_DOUBLE_EQ(lr_at(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 4), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 1000), 1.0);

  c.schedule = OptimizerConfig::Linear;
  EXPECT_DOUBLE_EQ(lr_at(c, 4), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 500), 0.1);

  c.schedule = OptimizerConfig::Cosine;
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0);
  EXPECT_NEAR(lr_at(c, 60), 0.55, 1e-12);
  EXPECT_NEAR(lr_at(c, 35), 0.1 + 0.9 * 0.5 * (1 + std::sqrt(0.5)), 1e-12);
  EXPECT_NEAR(lr_at(c, 110), 0.1, 1e-12);
  EXPECT_NEAR(lr_at(c, 200), 0.1, 1e-12);

  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(lr_at(c, 0), 1.0);
  c.max_steps = 0;  // no decay horizon
  EXPECT_DOUBLE_EQ(lr_at(c, 50), 1.0);

  // The optimizer applies lr_at(step_count) and counts steps.
  auto m = make_stage(tiny_config(1), 0, 1);
  OptimizerConfig oc;
  oc.lr = 0.5;
  oc.warmup_steps = 4;
  StageOptimizer opt(*m, oc);
  EXPECT_DOUBLE_EQ(opt.lr_at(1), 0.25);
  opt.step();
  EXPECT_EQ(opt.step_count(), 1);
  EXPECT_DOUBLE_EQ(opt.last_lr(), 0.125);
  opt.set_step_count(10);
  opt.step();
  EXPECT_DOUBLE_EQ(opt.last_lr(), 0.5);
  EXPECT_EQ(opt.step_count(), 11);
}

TEST(OptimizerConfig, Validation) {
  OptimizerConfig c;
  c.beta1 = 1.0;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c = OptimizerConfig{};
  c.min_lr_ratio = 2;
  EXPECT_THROW(validate(c), std::invalid_argument);
  EXPECT_NO_THROW(validate(OptimizerConfig{}));
}

double train(OptimizerConfig::Kind kind, double lr, double* first_loss) {
  const auto config = tiny_config(1);
  auto m = make_stage(config, 0, 3);
  OptimizerConfig oc;
  oc.kind = kind;
  oc.lr = lr;
  oc.warmup_steps = 3;
  oc.max_steps = 30;
  oc.schedule = OptimizerConfig::Cosine;
  oc.min_lr_ratio = 0.1;
  StageOptimizer opt(*m, oc);
  auto tokens = random_tokens(config, 4, config.sequence_length + 1, 17);
  using torch::indexing::Slice;
  auto inputs = tokens.index({Slice(), Slice(0, -1)});
  auto targets = tokens.index({Slice(), Slice(1)});
  double loss_value = 0;
  for (int i = 0; i < 30; ++i) {
    auto loss = m->loss(m->forward(inputs), targets);
    loss.backward();
    loss_value = loss.item<double>();
    if (i == 0) *first_loss = loss_value;
    opt.step();
    EXPECT_TRUE(std::isfinite(opt.last_grad_norm()));
  }
  EXPECT_EQ(opt.step_count(), 30);
  torch::NoGradGuard no_grad;
  return m->loss(m->forward(inputs), targets).item<double>();
}

TEST(StageOptimizer, AdamWReducesLoss) {
  double first = 0;
  const double last = train(OptimizerConfig::AdamW, 3e-3, &first);
  EXPECT_NEAR(first, std::log(64.0), 0.3);  // near-uniform at init
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

TEST(StageOptimizer, LambReducesLoss) {
  double first = 0;
  const double last = train(OptimizerConfig::Lamb, 5e-2, &first);
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

// The AdamW update follows torch::optim::AdamW (decay only on the decayed group).
TEST(StageOptimizer, AdamWMatchesTorchAdamW) {
  const auto config = tiny_config(1);
  auto a = make_stage(config, 0, 5);
  auto b = make_stage(config, 0, 5);
  OptimizerConfig oc;
  oc.lr = 1e-2;
  oc.weight_decay = 0.1;
  oc.grad_clip = 0;
  StageOptimizer ours(*a, oc);

  std::vector<torch::Tensor> decay, no_decay;
  auto named = b->named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    (ours.decayed()[i] ? decay : no_decay).push_back(named[i].value());
  }
  ASSERT_FALSE(decay.empty());
  ASSERT_FALSE(no_decay.empty());
  auto opts = torch::optim::AdamWOptions(oc.lr).betas({oc.beta1, oc.beta2}).eps(oc.eps);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(opts).weight_decay(oc.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(opts).weight_decay(0.0)));
  torch::optim::AdamW theirs(groups, opts);

  // The same random gradients for both (not the model's own: its key bias gets a gradient of ~1e-12
  // that is pure rounding noise, softmax ignoring a per-query constant, which Adam turns into
  // updates of up to lr * m / eps; one ulp of difference in a step then changes the next's noise).
  torch::manual_seed(11);
  auto pa = a->parameters(), pb = b->parameters();
  for (int i = 0; i < 5; ++i) {
    for (size_t j = 0; j < pa.size(); ++j) {
      auto g = torch::randn(pa[j].sizes()) * (j % 3 == 0 ? 1e-3 : 1.0);
      pa[j].mutable_grad() = g.clone();
      pb[j].mutable_grad() = g.clone();
    }
    ours.step();
    theirs.step();
    theirs.zero_grad();
  }
  // Up to float rounding: libtorch 2.x runs ours as its fused kernel.
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-6, 1e-7))
        << named[i].key() << ": max difference " << (pa[i] - pb[i]).abs().max().item<double>();
  }
}

TEST(StageOptimizer, ClipsToGlobalNorm) {
  const auto config = tiny_config(1);
  auto m = make_stage(config, 0, 5);
  OptimizerConfig oc;
  oc.lr = 0.0;  // look at the clipped gradient only through the first moment
  oc.beta1 = 0.0;
  oc.grad_clip = 0.5;
  StageOptimizer opt(*m, oc);
  auto params = m->parameters();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params) p.mutable_grad() = torch::full_like(p, 1.0);
  }
  int64_t n = 0;
  for (auto& p : params) n += p.numel();
  opt.step();
  EXPECT_NEAR(opt.last_grad_norm(), std::sqrt(static_cast<double>(n)), 1e-3);
  // beta1 = 0: exp_avg holds the clipped gradient.
  std::vector<torch::Tensor> flat;
  for (auto& t : opt.exp_avg()) flat.push_back(t.reshape({-1}));
  EXPECT_NEAR(torch::cat(flat).norm().item<double>(), 0.5, 1e-4);
  // Gradients were zeroed.
  for (auto& p : params) EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
}

TEST(StageOptimizer, NonFiniteGradientSkipsUpdate) {
  auto m = make_stage(tiny_config(1), 0, 5);
  OptimizerConfig oc;
  oc.lr = 0.1;
  StageOptimizer opt(*m, oc);
  auto before = m->parameters()[0].clone();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.mutable_grad() = torch::full_like(p, NAN);
  }
  opt.step();
  EXPECT_FALSE(std::isfinite(opt.last_grad_norm()));
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(opt.step_count(), 1);
  EXPECT_EQ(opt.moment_steps(), 0);
  EXPECT_TRUE(torch::equal(before, m->parameters()[0]));
}

}  // namespace
}  // namespace swarm::model
