// planner/layer_split.h: layers per stage balanced against the embedding's and the head's cost.
#include "planner/layer_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>

namespace swarm::planner {
namespace {

// The largest stage cost of the best split, found by trying every split (small cases only).
double brute_force_best(int64_t layers, int64_t stages, const SplitCosts& c) {
  double best = 1e300;
  std::vector<int64_t> n(static_cast<size_t>(stages), 1);
  std::function<void(size_t, int64_t)> go = [&](size_t s, int64_t left) {
    if (s + 1 == n.size()) {
      n[s] = left;
      const auto costs = split_stage_costs(n, c);
      best = std::min(best, *std::max_element(costs.begin(), costs.end()));
      return;
    }
    for (int64_t k = 1; k <= left - static_cast<int64_t>(n.size() - s - 1); ++k) {
      n[s] = k;
      go(s + 1, left - k);
    }
  };
  go(0, layers);
  return best;
}

TEST(LayerSplit, WithoutExtrasTheLayersSplitEvenly) {
  EXPECT_EQ(balanced_layers(6, 3, {1, 0, 0}), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(balanced_layers(7, 3, {1, 0, 0}), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(balanced_layers(3, 3, {1, 0, 0}), (std::vector<int64_t>{1, 1, 1}));
}

TEST(LayerSplit, TheHeadsStageTakesFewerLayers) {
  // A head worth 4 layers: 12 layers + 4 over 3 stages is about 5.3 each.
  EXPECT_EQ(balanced_layers(12, 3, {1, 0, 4}), (std::vector<int64_t>{5, 5, 2}));
  // The embedding counts too: 12 + 2 + 4 over 3 stages is 6 each.
  EXPECT_EQ(balanced_layers(12, 3, {1, 2, 4}), (std::vector<int64_t>{4, 6, 2}));
  // A head worth more than the rest: the last stage still holds a layer.
  EXPECT_EQ(balanced_layers(4, 2, {1, 0, 100}), (std::vector<int64_t>{3, 1}));
}

TEST(LayerSplit, TheGreedySplitIsAsGoodAsTheBestOfAllSplits) {
  for (int64_t stages = 1; stages <= 4; ++stages)
    for (int64_t layers = stages; layers <= 12; ++layers)
      for (double head : {0.0, 0.5, 2.0, 7.3})
        for (double embed : {0.0, 0.7, 3.0}) {
          const SplitCosts c{1.0, embed, head};
          const auto n = balanced_layers(layers, stages, c);
          ASSERT_EQ(static_cast<int64_t>(n.size()), stages);
          EXPECT_EQ(std::accumulate(n.begin(), n.end(), int64_t{0}), layers);
          EXPECT_TRUE(std::all_of(n.begin(), n.end(), [](int64_t k) { return k >= 1; }));
          const auto costs = split_stage_costs(n, c);
          EXPECT_DOUBLE_EQ(*std::max_element(costs.begin(), costs.end()), brute_force_best(layers, stages, c))
              << layers << " layers, " << stages << " stages, embedding " << embed << ", head " << head;
        }
}

TEST(LayerSplit, ImpossibleSplitsAreRefused) {
  EXPECT_THROW(balanced_layers(2, 3, {1, 0, 0}), std::invalid_argument);
  EXPECT_THROW(balanced_layers(2, 0, {1, 0, 0}), std::invalid_argument);
  EXPECT_THROW(balanced_layers(2, 2, {0, 0, 0}), std::invalid_argument);
}

TEST(LayerSplit, SmolLm2OnThreeStagesGivesTheHeadsStageFewLayers) {
  // SmolLM2-135M: V 49152, H 576, I 1536, 9 heads, 3 KV heads, head_dim 64, 30 layers; T 256.
  StageShape shape;
  shape.vocab_size = 49152;
  shape.hidden_size = 576;
  shape.intermediate_size = 1536;
  shape.num_heads = 9;
  shape.kv_heads = 3;
  shape.head_dim = 64;
  shape.sequence_length = 256;
  shape.gated_mlp = true;
  const SplitCosts c = split_costs(shape);
  EXPECT_GT(c.head, 5 * c.layer);           // 2 H V per token against ~2 * 3.5 M
  EXPECT_LT(c.embedding, 0.1 * c.layer);
  const auto n = balanced_layers(30, 3, c);
  EXPECT_EQ(std::accumulate(n.begin(), n.end(), int64_t{0}), 30);
  EXPECT_LT(n[2], n[0]);
  EXPECT_LT(n[2], n[1]);
}

}  // namespace
}  // namespace swarm::planner
