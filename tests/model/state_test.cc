#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/test_util.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/state.h"

namespace swarm::model {
namespace {

using testing::random_tokens;
using testing::tiny_config;

// Random gradients, reproducible from a seed.
std::vector<torch::Tensor> fake_grads(StageModel& m, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<torch::Tensor> g;
  for (const auto& p : m.parameters()) g.push_back(torch::randn(p.sizes(), gen) * 0.1);
  return g;
}

void expect_same_state(StageModel& a, StageOptimizer& oa, StageModel& b, StageOptimizer& ob) {
  auto pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << oa.names()[i];
    EXPECT_TRUE(torch::equal(oa.exp_avg()[i], ob.exp_avg()[i])) << oa.names()[i];
    EXPECT_TRUE(torch::equal(oa.exp_avg_sq()[i], ob.exp_avg_sq()[i])) << oa.names()[i];
  }
  EXPECT_EQ(oa.step_count(), ob.step_count());
  EXPECT_EQ(oa.moment_steps(), ob.moment_steps());
  EXPECT_EQ(param_fingerprint(a), param_fingerprint(b));
}

class StateRoundTrip : public ::testing::TestWithParam<OptimizerConfig::Kind> {};

TEST_P(StateRoundTrip, JoinerContinuesExactlyLikeDonor) {
  const auto config = tiny_config(3);
  OptimizerConfig oc;
  oc.kind = GetParam();
  oc.lr = 1e-2;
  oc.warmup_steps = 2;
  oc.max_steps = 20;
  oc.schedule = OptimizerConfig::Cosine;

  auto donor = make_stage(config, 1, 7);
  StageOptimizer donor_opt(*donor, oc);
  for (uint64_t i = 0; i < 3; ++i) {
    set_grads(*donor, fake_grads(*donor, 100 + i));
    donor_opt.step();
  }
  const std::string blob = save_state(*donor, donor_opt);

  auto joiner = make_stage(config, 1, 8);  // different init: everything must come from the blob
  StageOptimizer joiner_opt(*joiner, oc);
  EXPECT_NE(param_fingerprint(*joiner), param_fingerprint(*donor));
  load_state(blob, *joiner, joiner_opt);
  EXPECT_EQ(joiner_opt.step_count(), 3);
  expect_same_state(*donor, donor_opt, *joiner, joiner_opt);

  // The next steps agree bit for bit.
  for (uint64_t i = 0; i < 2; ++i) {
    auto g = fake_grads(*donor, 200 + i);
    set_grads(*donor, g);
    set_grads(*joiner, g);
    donor_opt.step();
    joiner_opt.step();
  }
  expect_same_state(*donor, donor_opt, *joiner, joiner_opt);
}

INSTANTIATE_TEST_SUITE_P(Kinds, StateRoundTrip,
                         ::testing::Values(OptimizerConfig::AdamW, OptimizerConfig::Lamb),
                         [](const auto& p) { return std::string(kind_name(p.param)); });

TEST(State, MismatchesThrowClearErrors) {
  const auto config = tiny_config(3);
  OptimizerConfig oc;
  auto s1 = make_stage(config, 1, 1);
  StageOptimizer o1(*s1, oc);
  const std::string blob = save_state(*s1, o1);

  auto s2 = make_stage(config, 2, 1);
  StageOptimizer o2(*s2, oc);
  auto before = param_fingerprint(*s2);
  try {
    load_state(blob, *s2, o2);
    FAIL() << "loading stage 1 state into stage 2 did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stage 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(param_fingerprint(*s2), before);

  auto other = tiny_config(3);
  other.hidden_size = 64;
  auto s_other = make_stage(other, 1, 1);
  StageOptimizer o_other(*s_other, oc);
  EXPECT_THROW(load_state(blob, *s_other, o_other), std::runtime_error);

  auto s1b = make_stage(config, 1, 2);
  OptimizerConfig lamb = oc;
  lamb.kind = OptimizerConfig::Lamb;
  StageOptimizer o_lamb(*s1b, lamb);
  EXPECT_THROW(load_state(blob, *s1b, o_lamb), std::runtime_error);

  StageOptimizer o1b(*s1b, oc);
  EXPECT_THROW(load_state(blob.substr(0, blob.size() / 2), *s1b, o1b), std::runtime_error);
  EXPECT_THROW(load_state("garbage", *s1b, o1b), std::runtime_error);
  std::string corrupt = blob;
  corrupt[corrupt.size() / 2] ^= 0x5A;
  EXPECT_THROW(load_state(corrupt, *s1b, o1b), std::runtime_error);
  EXPECT_NO_THROW(load_state(blob, *s1b, o1b));
  EXPECT_EQ(param_fingerprint(*s1b), param_fingerprint(*s1));
}

TEST(Grads, FlattenUnflattenRoundTrip) {
  const auto config = tiny_config(2);
  auto m = make_stage(config, 0, 4);
  auto tokens = random_tokens(config, 2, 8, 1);
  m->forward(tokens).pow(2).mean().backward();

  auto g = grads(*m);
  ASSERT_EQ(g.size(), m->parameters().size());
  auto flat = flatten(g);
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  EXPECT_EQ(flat.dim(), 1);
  EXPECT_EQ(flat.numel(), n);
  auto expected = flat.clone();

  // Average with a second "peer" whose gradient is zero: halves everything.
  auto averaged = (flat + torch::zeros_like(flat)) / 2;
  unflatten_into(averaged, g);  // writes straight into the live gradients
  auto after = grads(*m);
  EXPECT_TRUE(torch::allclose(flatten(after), expected / 2));

  // set_grads on a fresh model, then read back.
  auto fresh = make_stage(config, 0, 4);
  auto zeros = grads(*fresh);  // undefined grads read as zeros
  EXPECT_EQ(flatten(zeros).abs().sum().item<double>(), 0.0);
  std::vector<torch::Tensor> targets;
  for (const auto& p : fresh->parameters()) targets.push_back(torch::empty_like(p));
  unflatten_into(expected, targets);
  set_grads(*fresh, targets);
  EXPECT_TRUE(torch::equal(flatten(grads(*fresh)), expected));

  EXPECT_THROW(unflatten_into(expected.narrow(0, 0, n - 1), targets), std::invalid_argument);
  targets.pop_back();
  EXPECT_THROW(set_grads(*fresh, targets), std::invalid_argument);
}

TEST(Grads, FingerprintTracksParameters) {
  auto a = make_stage(tiny_config(2), 1, 4);
  auto b = make_stage(tiny_config(2), 1, 4);
  EXPECT_EQ(param_fingerprint(*a), param_fingerprint(*b));
  {
    torch::NoGradGuard no_grad;
    auto p = b->parameters().back();
    p.view({-1})[0] += 1e-3;
  }
  EXPECT_NE(param_fingerprint(*a), param_fingerprint(*b));
}

}  // namespace
}  // namespace swarm::model
