#include "planner/flops.h"

#include <gtest/gtest.h>

namespace swarm::planner {
namespace {

TEST(Flops, MatmulCount) {
  StageShape c;  // H=192, T=128, V=256, L=2, MLP 4H, gpt2
  const double H = 192, T = 128, V = 256;
  const double layer = T * (2 * (3 * H * H + H * H + 8 * H * H) + 4 * T * H);
  EXPECT_DOUBLE_EQ(stage_flops_per_sample(c, false), 2 * layer);
  EXPECT_DOUBLE_EQ(stage_flops_per_sample(c, true), 2 * layer + T * 2 * H * V);
}

TEST(Flops, StageCostsCarryTheHeadOnTheLastStageOnly) {
  StageShape c;
  const auto costs = stage_costs(c, {2, 2, 2});
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_DOUBLE_EQ(costs[0], costs[1]);
  EXPECT_GT(costs[2], costs[1]);
  EXPECT_DOUBLE_EQ(costs[2], stage_flops_per_sample(c, true));
  ASSERT_EQ(stage_costs(c, {2}).size(), 1u);
  EXPECT_DOUBLE_EQ(stage_costs(c, {2})[0], stage_flops_per_sample(c, true));
  EXPECT_TRUE(stage_costs(c, {}).empty());
}

TEST(Flops, UnevenStagesCostTheirOwnLayers) {
  StageShape c;
  const auto costs = stage_costs(c, {1, 3, 2});
  StageShape one = c, three = c;
  one.layers = 1;
  three.layers = 3;
  EXPECT_DOUBLE_EQ(costs[0], stage_flops_per_sample(one, false));
  EXPECT_DOUBLE_EQ(costs[1], stage_flops_per_sample(three, false));
  EXPECT_DOUBLE_EQ(costs[2], stage_flops_per_sample(c, true));
}

// Llama: grouped-query attention shrinks k and v, an explicit head width sets q and o, the gated
// MLP has three matrices.
TEST(Flops, LlamaShapes) {
  StageShape c;
  c.hidden_size = 64;
  c.sequence_length = 32;
  c.layers = 1;
  c.num_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 24;  // Q = 96, KV = 48
  c.intermediate_size = 160;
  c.gated_mlp = true;
  const double H = 64, T = 32, Q = 96, KV = 48, I = 160;
  const double layer = T * (2 * (H * Q + 2 * H * KV + Q * H) + 2 * 3 * H * I + 4 * T * Q);
  EXPECT_DOUBLE_EQ(stage_flops_per_sample(c, false), layer);
  c.gated_mlp = false;
  EXPECT_DOUBLE_EQ(stage_flops_per_sample(c, false), layer - T * 2 * H * I);
}

}  // namespace
}  // namespace swarm::planner
