#include "planner/flops.h"

#include <gtest/gtest.h>

namespace swarm::planner {
namespace {

TEST(Flops, MatmulCount) {
  StageShape c;  // H=192, T=128, V=256, L=2, mlp 4
  const double H = 192, T = 128, V = 256;
  const double layer = T * (2 * (3 * H * H + H * H + 8 * H * H) + 4 * T * H);
  EXPECT_DOUBLE_EQ(stage_flops_per_sample(c, false), 2 * layer);
  EXPECT_DOUBLE_EQ(stage_flops_per_sample(c, true), 2 * layer + T * 2 * H * V);
}

TEST(Flops, StageCostsCarryTheHeadOnTheLastStageOnly) {
  StageShape c;
  const auto costs = stage_costs(c, 3);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_DOUBLE_EQ(costs[0], costs[1]);
  EXPECT_GT(costs[2], costs[1]);
  EXPECT_DOUBLE_EQ(costs[2], stage_flops_per_sample(c, true));
  ASSERT_EQ(stage_costs(c, 1).size(), 1u);
  EXPECT_DOUBLE_EQ(stage_costs(c, 1)[0], stage_flops_per_sample(c, true));
  EXPECT_TRUE(stage_costs(c, 0).empty());
}

}  // namespace
}  // namespace swarm::planner
