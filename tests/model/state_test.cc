#include <gtest/gtest.h>

#include <utility>
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

void joiner_continues_exactly_like_donor(const ModelConfig& config, OptimizerConfig::Kind kind) {
  OptimizerConfig oc;
  oc.kind = kind;
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

TEST_P(StateRoundTrip, JoinerContinuesExactlyLikeDonor) { joiner_continues_exactly_like_donor(tiny_config(3), GetParam()); }
TEST_P(StateRoundTrip, LlamaJoinerContinuesExactlyLikeDonor) {
  joiner_continues_exactly_like_donor(testing::tiny_llama_config(3), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Kinds, StateRoundTrip,
                         ::testing::Values(OptimizerConfig::AdamW, OptimizerConfig::Lamb),
                         [](const auto& p) { return std::string(kind_name(p.param)); });

// The blob is built in one allocation, with room left for a checkpoint's trailer: a stage's
// state never passes through a buffer grown by doubling (up to twice its size), and
// write_checkpoint appends its trailer without a second copy of the state.
TEST(State, TheBlobIsOneAllocationWithRoomForTheCheckpointTrailer) {
  ModelConfig c = tiny_config(3);
  c.hidden_size = 256;  // a state of ~9 MB: doubling would leave megabytes unused
  c.gpt2.intermediate_size = 1024;
  auto stage = make_stage(c, 1, 7);
  StageOptimizer opt(*stage, OptimizerConfig{});
  std::string blob = save_state(*stage, opt);
  ASSERT_GT(blob.size(), 8u << 20);
  EXPECT_GE(blob.capacity(), blob.size() + 1024);             // a trailer fits
  EXPECT_LE(blob.capacity(), blob.size() + 128 * 1024);       // and only the slack is left over
  const auto* data = blob.data();
  blob.append(std::string(160, 't'));  // more than write_checkpoint's trailer
  EXPECT_EQ(blob.data(), data);        // in place
}

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

// Where save_state's layout puts the optimizer kind byte (after magic, version, config, stage) and
// the first parameter's name (after kind, step count, moment steps, parameter count).
// Version 2's gpt2 config of 3 stages: architecture, 5 sizes, the layer counts, the MLP width,
// shared, eps.
constexpr size_t kConfigBytes = 1 + 5 * 8 + (4 + 3 * 8) + (8 + 1 + 8);
constexpr size_t kKindOffset = 8 + 4 + kConfigBytes + 8;
constexpr size_t kFirstNameOffset = kKindOffset + 1 + 8 + 8 + 4;

// `blob` cut at `at`, `tail` appended and the checksum recomputed: a well-sealed blob that
// load_state reads up to `tail`.
std::string resealed(const std::string& blob, size_t at, const std::string& tail) {
  std::string out = blob.substr(0, at) + tail;
  const uint64_t sum = state_checksum(out.data(), out.size());
  return out.append(reinterpret_cast<const char*>(&sum), sizeof sum);
}

template <class T>
std::string bytes_of(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// The message load_state refuses `blob` with; "" if it loads, "<other>" if it throws anything but
// std::runtime_error.
std::string refusal(const std::string& blob, StageModel& model, StageOptimizer& opt) {
  try {
    load_state(blob, model, opt);
  } catch (const std::runtime_error& e) {
    return e.what();
  } catch (...) {
    return "<other>";
  }
  return "";
}

// Found by fuzzing (tests/fuzz): the dims of a tensor multiplied past 64 bits into a small byte
// count, and libtorch was asked for the whole shape (c10::Error, not a refusal); a tensor of zero
// elements was copied from a null data pointer. The shape is now checked against the parameter's
// before anything is allocated.
TEST(State, ATensorShapeOtherThanTheParametersIsRefusedBeforeAllocation) {
  auto s = make_stage(tiny_config(3), 1, 1);
  StageOptimizer o(*s, OptimizerConfig{});
  const std::string blob = save_state(*s, o);
  const std::string name = o.names()[0];
  const size_t tensor_at = kFirstNameOffset + 4 + name.size();
  ASSERT_EQ(blob.substr(kFirstNameOffset + 4, name.size()), name);
  const std::string f32(1, static_cast<char>(torch::kFloat));
  const std::string overflowing = f32 + '\2' + bytes_of<int64_t>(int64_t{1} << 32) +
                                  bytes_of<int64_t>(int64_t{1} << 32) + bytes_of<uint64_t>(0);
  EXPECT_EQ(refusal(resealed(blob, tensor_at, overflowing), *s, o),
            "load_state: shape of '" + name + "' is [4294967296, 4294967296], expected " +
                c10::str(o.params()[0].sizes()));
  const std::string empty = f32 + '\1' + bytes_of<int64_t>(0) + bytes_of<uint64_t>(0);
  EXPECT_EQ(refusal(resealed(blob, tensor_at, empty), *s, o),
            "load_state: shape of '" + name + "' is [0], expected " + c10::str(o.params()[0].sizes()));
  EXPECT_EQ(refusal(blob, *s, o), "");
}

// Found by fuzzing: an optimizer kind byte other than 0 and 1 became an OptimizerConfig::Kind
// outside the enum (undefined behaviour) and read as "adamw".
TEST(State, AnUnknownOptimizerKindIsRefusedNamingItsValue) {
  auto s = make_stage(tiny_config(3), 1, 1);
  StageOptimizer o(*s, OptimizerConfig{});
  const std::string blob = save_state(*s, o);
  ASSERT_EQ(blob[kKindOffset], static_cast<char>(OptimizerConfig::AdamW));
  std::string rest = blob.substr(kKindOffset + 1, blob.size() - 8 - kKindOffset - 1);
  EXPECT_EQ(refusal(resealed(blob, kKindOffset, '\7' + rest), *s, o),
            "load_state: optimizer kind 7 is neither adamw (0) nor lamb (1)");
}

// What a build before architectures wrote (version 1: a 7 x i64 + u8 config, the blocks named by
// their index within the stage) and version 2 (today's config, still local names) still load, into
// the stage's global names.
TEST(State, AVersion1BlobStillLoads) {
  const auto config = tiny_config(3);  // 2 layers a stage: stage 1 holds block2 and block3
  auto donor = make_stage(config, 1, 4);
  StageOptimizer donor_opt(*donor, OptimizerConfig{});
  const std::string v2 = save_state(*donor, donor_opt);
  std::string v1 = v2.substr(0, 8) + bytes_of<uint32_t>(1);
  for (int64_t v : {config.vocab_size, config.hidden_size, config.num_heads, int64_t{2}, config.sequence_length,
                    int64_t{4}, config.num_stages}) {
    v1 += bytes_of<int64_t>(v);
  }
  v1 += '\0';  // not shared
  std::string rest = v2.substr(8 + 4 + kConfigBytes, v2.size() - 8 - (8 + 4 + kConfigBytes));
  for (const auto& [global, local] : {std::pair<std::string, std::string>{"block2.", "block0."}, {"block3.", "block1."}}) {
    for (size_t at = rest.find(global); at != std::string::npos; at = rest.find(global, at + 1)) {
      rest.replace(at, global.size(), local);
    }
  }
  v1 = resealed(v1, v1.size(), rest);
  auto joiner = make_stage(config, 1, 5);
  StageOptimizer joiner_opt(*joiner, OptimizerConfig{});
  EXPECT_EQ(refusal(v1, *joiner, joiner_opt), "");
  EXPECT_EQ(param_fingerprint(*joiner), param_fingerprint(*donor));
  // Version 2 (architectures, still local names) loads too.
  std::string v2_local = v2.substr(0, 8) + bytes_of<uint32_t>(2) + v2.substr(12, kConfigBytes);
  v2_local = resealed(v2_local, v2_local.size(), rest);
  auto joiner2 = make_stage(config, 1, 6);
  StageOptimizer joiner2_opt(*joiner2, OptimizerConfig{});
  EXPECT_EQ(refusal(v2_local, *joiner2, joiner2_opt), "");
  EXPECT_EQ(param_fingerprint(*joiner2), param_fingerprint(*donor));
  // A version this build does not know is refused by name.
  std::string v9 = v2;
  v9.replace(8, 4, bytes_of<uint32_t>(9));
  EXPECT_EQ(refusal(resealed(v9, v9.size() - 8, ""), *joiner, joiner_opt),
            "load_state: state version 9, this build reads versions 1 to 3");
}

// A llama blob is refused by a gpt2 stage of the same sizes, and the message names both.
TEST(State, AnotherArchitectureIsRefusedNamingBoth) {
  const auto llama = testing::tiny_llama_config(3);
  auto gpt2 = tiny_config(3);
  gpt2.stage_layers = llama.stage_layers;
  auto s_llama = make_stage(llama, 1, 1);
  StageOptimizer o_llama(*s_llama, OptimizerConfig{});
  auto s_gpt2 = make_stage(gpt2, 1, 1);
  StageOptimizer o_gpt2(*s_gpt2, OptimizerConfig{});
  const std::string why = refusal(save_state(*s_llama, o_llama), *s_gpt2, o_gpt2);
  EXPECT_NE(why.find("of model {llama vocab=64"), std::string::npos) << why;
  EXPECT_NE(why.find("of model {gpt2 vocab=64"), std::string::npos) << why;
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
