#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/test_util.h"
#include "worker/model/arch_table.h"
#include "worker/model/lm.h"
#include "worker/model/stage.h"
#include "worker/model/state.h"

namespace swarm::model {
namespace {

using testing::random_tokens;
using testing::tiny_config;
using testing::tiny_llama_config;

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// Runs the staged pipeline the way workers do: each stage gets a detached input, the backward
// goes stage by stage with the gradient of the next stage's input.
struct PipelineResult {
  torch::Tensor logits, loss;
};

PipelineResult run_pipeline(std::vector<std::shared_ptr<StageModel>>& stages,
                            const torch::Tensor& tokens, const torch::Tensor& targets) {
  std::vector<torch::Tensor> inputs, outputs;
  torch::Tensor x = tokens;
  for (auto& s : stages) {
    torch::Tensor in = s->is_first() ? x : x.detach().requires_grad_(true);
    inputs.push_back(in);
    x = s->forward(in);
    outputs.push_back(x);
  }
  auto loss = stages.back()->loss(x, targets);
  loss.backward();
  for (int i = static_cast<int>(stages.size()) - 2; i >= 0; --i) {
    outputs[i].backward(inputs[i + 1].grad());
  }
  return {x.detach(), loss.detach()};
}

// The model configurations every model-level property is checked on.
struct Arch {
  const char* name;
  ModelConfig config;
};
const Arch kArchs[] = {{"gpt2", tiny_config(3)},
                       {"gpt2_shared", tiny_config(3, /*shared=*/true)},
                       {"llama", tiny_llama_config(3)}};
std::string arch_name(const ::testing::TestParamInfo<Arch>& p) { return p.param.name; }

class StagedEqualsUnstaged : public ::testing::TestWithParam<Arch> {};

TEST_P(StagedEqualsUnstaged, OutputsAndGradients) {
  const auto config = GetParam().config;
  auto lm = make_reference_model(config, 11);
  // Stages start from another seed, then receive the reference weights.
  std::vector<std::shared_ptr<StageModel>> stages;
  for (int64_t s = 0; s < config.num_stages; ++s) stages.push_back(make_stage(config, s, 99));
  lm->load_into_stages(stages);

  auto tokens = random_tokens(config, 3, config.sequence_length, 1);
  auto targets = random_tokens(config, 3, config.sequence_length, 2);

  auto logits = lm->forward(tokens);
  auto loss = lm->loss(logits, targets);
  loss.backward();

  auto staged = run_pipeline(stages, tokens, targets);
  // The same operations on the same values: equal bit for bit.
  EXPECT_TRUE(torch::equal(staged.logits, logits.detach()));
  EXPECT_TRUE(torch::equal(staged.loss, loss.detach()));

  // Parameter gradients, matched by (stage, local module) <-> reference module.
  auto expect_grads_equal = [](torch::nn::Module& ref, torch::nn::Module& got, const std::string& where) {
    auto a = ref.named_parameters();
    auto b = got.named_parameters();
    ASSERT_EQ(a.size(), b.size()) << where;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i].value().grad().defined()) << where << " " << a[i].key();
      ASSERT_TRUE(b[i].value().grad().defined()) << where << " " << b[i].key();
      EXPECT_LT(max_abs_diff(a[i].value().grad(), b[i].value().grad()), 1e-6) << where << " " << a[i].key();
    }
  };
  int checked = 0;
  for (int64_t s = 0; s < config.num_stages; ++s) {
    auto& st = *stages[s];
    if (st.embedding()) {
      expect_grads_equal(*lm->embedding(), *st.embedding(), "embed");
      ++checked;
    }
    for (size_t j = 0; j < st.blocks().size(); ++j) {
      expect_grads_equal(*lm->block_at(s, static_cast<int64_t>(j)), *st.blocks()[j],
                         "stage " + std::to_string(s) + " block " + std::to_string(j));
      ++checked;
    }
    if (st.head()) {
      expect_grads_equal(*lm->head(), *st.head(), "head");
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 + (config.gpt2.shared_layers && !config.is_llama() ? config.num_stages : config.total_layers()));
}

INSTANTIATE_TEST_SUITE_P(Architectures, StagedEqualsUnstaged, ::testing::ValuesIn(kArchs), arch_name);

class StageOfArch : public ::testing::TestWithParam<Arch> {};
INSTANTIATE_TEST_SUITE_P(Architectures, StageOfArch, ::testing::ValuesIn(kArchs), arch_name);

TEST_P(StageOfArch, InitMatchesReferenceSlice) {
  const auto config = GetParam().config;
  auto lm = make_reference_model(config, 5);
  auto from_lm = lm->make_stages();
  for (int64_t s = 0; s < config.num_stages; ++s) {
    auto direct = make_stage(config, s, 5);
    EXPECT_EQ(param_fingerprint(*direct), param_fingerprint(*from_lm[s])) << "stage " << s;
  }
}

// A stage's parameters are the arch table's (arch_table.h), in its order, with its shapes: the
// names the import reads and the export writes. Layers carry their global index.
TEST_P(StageOfArch, ParametersAreTheArchTablesWithGlobalLayerIndices) {
  const auto config = GetParam().config;
  for (int64_t s = 0; s < config.num_stages; ++s) {
    auto stage = make_stage(config, s, 1);
    const auto params = stage->named_parameters();
    if (config.gpt2.shared_layers && !config.is_llama()) {
      EXPECT_THROW(stage_tensors(config, s), std::invalid_argument);
      EXPECT_EQ(params[s == 0 ? 2 : 0].key(), "shared_block" + std::to_string(s) + ".ln1_weight");
      continue;
    }
    const auto table = stage_tensors(config, s);
    ASSERT_EQ(table.size(), params.size()) << "stage " << s;
    for (size_t i = 0; i < table.size(); ++i) {
      EXPECT_EQ(params[i].key(), table[i].internal) << "stage " << s;
      EXPECT_EQ(params[i].value().sizes().vec(), table[i].shape) << table[i].internal;
    }
    const std::string first = "block" + std::to_string(config.first_layer(s)) + ".";
    EXPECT_EQ(params[s == 0 ? (config.is_llama() ? 1 : 2) : 0].key().rfind(first, 0), 0u) << "stage " << s;
  }
}

TEST_P(StageOfArch, CausalMask) {
  auto config = GetParam().config;
  config.num_stages = 1;
  config.stage_layers = {2};
  auto m = make_stage(config, 0, 21);
  auto tokens = random_tokens(config, 2, config.sequence_length, 8);
  const int64_t k = 9;
  auto changed = tokens.clone();
  changed.index_put_({torch::indexing::Slice(), k}, (tokens.index({torch::indexing::Slice(), k}) + 1) % config.vocab_size);
  torch::NoGradGuard no_grad;
  auto a = m->forward(tokens), b = m->forward(changed);
  using torch::indexing::Slice;
  EXPECT_TRUE(torch::equal(a.index({Slice(), Slice(0, k)}), b.index({Slice(), Slice(0, k)})))
      << "a future token changed earlier positions";
  EXPECT_GT(max_abs_diff(a.index({Slice(), k}), b.index({Slice(), k})), 1e-6);
  EXPECT_GT(max_abs_diff(a.index({Slice(), Slice(k + 1)}), b.index({Slice(), Slice(k + 1)})), 1e-6);
}

TEST_P(StageOfArch, ForwardIsDeterministicAndShorterInputsWork) {
  auto config = GetParam().config;
  auto m = make_stage(config, 0, 3);
  auto tokens = random_tokens(config, 2, config.sequence_length, 4);
  EXPECT_TRUE(torch::equal(m->forward(tokens), m->forward(tokens)));
  // The first 5 positions of a full-length input are what a 5-token input computes.
  torch::NoGradGuard no_grad;
  using torch::indexing::Slice;
  const auto full = m->forward(tokens), part = m->forward(tokens.index({Slice(), Slice(0, 5)}));
  EXPECT_LT(max_abs_diff(full.index({Slice(), Slice(0, 5)}), part), 1e-5);
}

TEST(StageModel, MakeStageIsDeterministic) {
  const auto config = tiny_config(3);
  for (int64_t s = 0; s < config.num_stages; ++s) {
    auto a = make_stage(config, s, 1234);
    auto b = make_stage(config, s, 1234);
    auto pa = a->named_parameters(), pb = b->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].key(), pb[i].key());
      EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key();
    }
    EXPECT_EQ(param_fingerprint(*a), param_fingerprint(*b));
    EXPECT_NE(param_fingerprint(*a), param_fingerprint(*make_stage(config, s, 1235)));
  }
  // Different stages hold different blocks.
  auto qkv = [&](int64_t stage) {
    return std::dynamic_pointer_cast<TransformerBlock>(make_stage(config, stage, 7)->blocks()[0])->qkv_weight;
  };
  EXPECT_FALSE(torch::equal(qkv(1), qkv(2)));
}

TEST(StageModel, ShapesAndRoles) {
  const auto config = tiny_config(3);
  auto s0 = make_stage(config, 0, 1), s1 = make_stage(config, 1, 1), s2 = make_stage(config, 2, 1);
  EXPECT_TRUE(s0->is_first());
  EXPECT_FALSE(s0->is_last());
  EXPECT_TRUE(s2->is_last());
  auto tokens = random_tokens(config, 2, 10, 3);
  auto h0 = s0->forward(tokens);
  EXPECT_EQ(h0.sizes(), (std::vector<int64_t>{2, 10, config.hidden_size}));
  EXPECT_EQ(h0.scalar_type(), torch::kFloat);
  auto h1 = s1->forward(h0);
  EXPECT_EQ(h1.sizes(), h0.sizes());
  auto logits = s2->forward(h1);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 10, config.vocab_size}));
  EXPECT_THROW(s1->loss(h1, tokens), std::logic_error);
  // Bad inputs get clear errors.
  EXPECT_THROW(s0->forward(h0), std::invalid_argument);
  EXPECT_THROW(s1->forward(tokens), std::invalid_argument);
  EXPECT_THROW(s0->forward(torch::full({1, 4}, config.vocab_size, torch::kLong)),
               std::invalid_argument);
  EXPECT_THROW(s0->forward(random_tokens(config, 1, config.sequence_length + 1, 1)),
               std::invalid_argument);
  EXPECT_THROW(s2->loss(logits, torch::full({2, 10}, -1, torch::kLong)), std::invalid_argument);
  EXPECT_THROW(make_stage(config, 3, 1), std::invalid_argument);
  // Single-stage model: ids -> logits.
  auto single = make_stage(tiny_config(1), 0, 1);
  EXPECT_TRUE(single->is_first() && single->is_last());
  EXPECT_EQ(single->forward(tokens).size(2), config.vocab_size);
}

TEST(StageModel, SharedLayersHaveOneBlock) {
  const auto config = tiny_config(2, true);
  auto shared = make_stage(config, 1, 1);
  auto distinct = make_stage(tiny_config(2, false), 1, 1);
  EXPECT_EQ(shared->blocks().size(), 1u);
  EXPECT_EQ(distinct->blocks().size(), 2u);
  EXPECT_LT(shared->parameters().size(), distinct->parameters().size());
}

}  // namespace
}  // namespace swarm::model
