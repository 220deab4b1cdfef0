// A worker answers bad requests with a clear error and keeps serving; forward/backward and the
// recompute path behave as the protocol says (worker/runtime/protocol.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <limits>

#include "tests/stage/swarm_fixture.h"
#include "worker/net/client.h"
#include "worker/model/stage_compute.h"
#include "worker/net/errors.h"
#include "worker/runtime/protocol.h"
#include "worker/runtime/tensor_wire.h"

namespace swarm {
namespace {

using runtime::make_message;
using runtime::to_wire;
using runtime::from_wire;

class WorkerProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    swarm_ = std::make_unique<testing::LocalSwarm>(testing::tiny_job(), 1);
    stage0_ = std::make_unique<net::Client>("127.0.0.1", swarm_->workers[0]->port(), testing::kSecret);
    stage1_ = std::make_unique<net::Client>("127.0.0.1", swarm_->workers[1]->port(), testing::kSecret);
  }

  net::Message forward0(const torch::Tensor& tokens, const std::string& mb, int64_t samples = 4) {
    auto m = make_message(net::Forward, {{"mb", mb}, {"stage", 0}, {"samples", samples}});
    m.tensors.push_back(to_wire(tokens));
    return stage0_->call(std::move(m), std::chrono::seconds(10));
  }

  // The remote error text of a request that must fail.
  std::string error_of(net::Client& c, net::Message m) {
    try {
      c.call(std::move(m), std::chrono::seconds(10));
    } catch (const net::RemoteError& e) {
      return e.what();
    }
    ADD_FAILURE() << "request was accepted";
    return "";
  }

  torch::Tensor tokens() { return torch::randint(0, 256, {4, 16}, torch::kInt64); }

  std::unique_ptr<testing::LocalSwarm> swarm_;
  std::unique_ptr<net::Client> stage0_, stage1_;
};

TEST_F(WorkerProtocol, ForwardReturnsHiddenStates) {
  auto reply = forward0(tokens(), "t/1");
  ASSERT_EQ(reply.type, net::ForwardReply);
  ASSERT_EQ(reply.tensors.size(), 1u);
  EXPECT_EQ(reply.tensors[0].shape, (std::vector<int64_t>{4, 16, 32}));
  EXPECT_EQ(swarm_->workers[0]->status().activations, 1);
}

TEST_F(WorkerProtocol, MalformedRequestsGetNamedErrorsAndTheWorkerKeepsServing) {
  struct Case {
    const char* name;
    net::Message msg;
    const char* expect;
  };
  std::vector<Case> cases;
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::zeros({4, 16}, torch::kFloat32)));
    cases.push_back({"float tokens", std::move(m), "input: expected int64 token ids, got float32"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::zeros({4, 16, 2}, torch::kInt64)));
    cases.push_back({"rank 3 tokens", std::move(m), "input: expected shape [batch, seq]"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::full({4, 16}, 999, torch::kInt64)));
    cases.push_back({"token out of range", std::move(m), "token ids must be in [0, 256)"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::zeros({4, 17}, torch::kInt64)));
    cases.push_back({"sequence too long", std::move(m), "sequence length must be in [1, 16]"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 3}});
    m.tensors.push_back(to_wire(torch::zeros({4, 16}, torch::kInt64)));
    cases.push_back({"batch differs from samples", std::move(m), "batch 4 != meta.samples 3"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 1}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::zeros({4, 16}, torch::kInt64)));
    cases.push_back({"wrong stage", std::move(m), "meta.stage: this worker serves stage 0, got 1"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 1 << 30}});
    cases.push_back({"absurd samples", std::move(m), "meta.samples: must be in [1, 65536], got 1073741824"});
  }
  {
    auto m = make_message(net::Forward, {{"stage", 0}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::zeros({4, 16}, torch::kInt64)));
    cases.push_back({"missing mb", std::move(m), "meta.mb: missing"});
  }
  {
    net::Message m;
    m.type = net::Forward;
    m.meta = "{not json";
    cases.push_back({"bad meta", std::move(m), "meta: not a JSON object"});
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
    cases.push_back({"no tensor", std::move(m), "forward: expected 1 tensor, got 0"});
  }
  {
    auto m = make_message(net::ForwardBackward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
    cases.push_back({"forward_backward on stage 0", std::move(m), "served by the last stage only"});
  }
  {
    net::Message m = make_message(999, nlohmann::json::object());
    cases.push_back({"unknown type", std::move(m), "message type 999 is not served by a worker"});
  }
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_NE(error_of(*stage0_, std::move(c.msg)).find(c.expect), std::string::npos);
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 1}, {"samples", 4}});
    auto h = torch::zeros({4, 16, 32});
    h[0][0][0] = std::numeric_limits<float>::quiet_NaN();
    m.tensors.push_back(to_wire(h));
    EXPECT_NE(error_of(*stage1_, std::move(m)).find("input: contains NaN or infinity"), std::string::npos);
  }
  {
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 1}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::zeros({4, 16, 32}, torch::kInt8)));
    EXPECT_NE(error_of(*stage1_, std::move(m)).find("input: expected float32, float16, bfloat16 or blockwise8 activations, got int8"),
              std::string::npos);
  }
  {  // a blockwise8 activation whose second block's scale is NaN: refused naming the block
    auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 1}, {"samples", 4}});
    auto w = runtime::encode_float(torch::ones({4, 16, 32}), {Compression::Blockwise8, 256}, "h");
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(w.data + 4, &nan, 4);
    m.tensors.push_back(w);
    EXPECT_NE(error_of(*stage1_, std::move(m)).find("input.scales[1]: nan is not a scale"),
              std::string::npos);
  }
  // Still serving, nothing accumulated from the rejected requests.
  EXPECT_EQ(forward0(tokens(), "t/ok").type, net::ForwardReply);
  EXPECT_EQ(swarm_->workers[0]->status().activations, 1);
  EXPECT_EQ(swarm_->workers[0]->status().samples_in_step, 0);
}

TEST_F(WorkerProtocol, RequestsWithoutTheSecretAreRefused) {
  net::Client intruder("127.0.0.1", swarm_->workers[0]->port(), "wrong-secret");
  auto m = make_message(net::Forward, {{"mb", "x"}, {"stage", 0}, {"samples", 4}});
  m.tensors.push_back(to_wire(tokens()));
  EXPECT_THROW(intruder.call(std::move(m), std::chrono::seconds(5)), net::NetError);
  EXPECT_EQ(swarm_->workers[0]->status().activations, 0);
  EXPECT_EQ(forward0(tokens(), "t/after").type, net::ForwardReply);
}

TEST_F(WorkerProtocol, BackwardUsesStoredActivationsOrRecomputesFromTheInput) {
  auto x = tokens();
  auto fwd = forward0(x, "t/7");
  auto hidden = from_wire(fwd.tensors[0]);
  auto grad = torch::ones_like(hidden) * 1e-3;

  // The normal path: the peer that ran the forward keeps the activations.
  auto bw = make_message(net::Backward, {{"mb", "t/7"}, {"stage", 0}, {"samples", 4}, {"recompute", false}});
  bw.tensors.push_back(to_wire(grad));
  auto reply = stage0_->call(std::move(bw), std::chrono::seconds(10));
  ASSERT_EQ(reply.type, net::BackwardReply);
  EXPECT_FALSE(runtime::parse_meta(reply).value("recomputed", true));
  EXPECT_TRUE(reply.tensors.empty());  // stage 0 has no input gradient
  EXPECT_EQ(swarm_->workers[0]->status().samples_in_step, 4);
  EXPECT_EQ(swarm_->workers[0]->status().activations, 0);

  // The activations are gone now: without the input the peer says so...
  auto again = make_message(net::Backward, {{"mb", "t/7"}, {"stage", 0}, {"samples", 4}, {"recompute", false}});
  again.tensors.push_back(to_wire(grad));
  EXPECT_NE(error_of(*stage0_, std::move(again)).find(runtime::kActivationMissing), std::string::npos);
  // ...with the code the trainer branches on (RemoteError::code(), never the text).
  auto once_more = make_message(net::Backward, {{"mb", "t/7"}, {"stage", 0}, {"samples", 4}, {"recompute", false}});
  once_more.tensors.push_back(to_wire(grad));
  try {
    stage0_->call(std::move(once_more), std::chrono::seconds(10));
    ADD_FAILURE() << "request was accepted";
  } catch (const net::RemoteError& e) {
    EXPECT_EQ(e.code(), net::ErrorCode::ActivationMissing) << e.what();
  }

  // ...and with the input it recomputes the forward.
  auto rc = make_message(net::Backward, {{"mb", "t/7"}, {"stage", 0}, {"samples", 4}, {"recompute", true}});
  rc.tensors.push_back(to_wire(grad));
  rc.tensors.push_back(to_wire(x));
  auto r2 = stage0_->call(std::move(rc), std::chrono::seconds(10));
  EXPECT_TRUE(runtime::parse_meta(r2).value("recomputed", false));
  EXPECT_EQ(swarm_->workers[0]->status().samples_in_step, 8);
}

// spec.pipeline.recomputeActivations: a middle stage keeps only the input of a forward and runs
// the forward again before its backward. Its answers are those of a stage that kept the graph: the
// same forward output and, from the same output gradient, the same input gradient; the step counts
// the samples once, and a backward is not reported as a failover recompute.
TEST(WorkerRecompute, AStageThatKeepsOnlyInputsAnswersAsOneThatKeepsTheGraph) {
  torch::set_num_threads(1);
  torch::manual_seed(3);
  const auto hidden = torch::randn({4, 16, 32});
  const auto grad = torch::randn({4, 16, 32}) * 1e-2;
  std::vector<torch::Tensor> outputs, input_grads;
  for (const bool recompute : {false, true}) {
    JobSpec spec = testing::tiny_job(3);
    spec.pipeline.recompute_activations = recompute;
    testing::LocalSwarm swarm(spec, 1);
    net::Client stage1("127.0.0.1", swarm.workers[1]->port(), testing::kSecret);
    auto fwd = make_message(net::Forward, {{"mb", "t/1"}, {"stage", 1}, {"samples", 4}});
    fwd.tensors.push_back(to_wire(hidden));
    auto out = stage1.call(std::move(fwd), std::chrono::seconds(10));
    ASSERT_EQ(out.type, net::ForwardReply);
    outputs.push_back(from_wire(out.tensors[0]).clone());
    EXPECT_EQ(swarm.workers[1]->status().activations, 1);
    auto bw = make_message(net::Backward, {{"mb", "t/1"}, {"stage", 1}, {"samples", 4}, {"recompute", false}});
    bw.tensors.push_back(to_wire(grad));
    auto reply = stage1.call(std::move(bw), std::chrono::seconds(10));
    ASSERT_EQ(reply.type, net::BackwardReply);
    EXPECT_FALSE(runtime::parse_meta(reply).value("recomputed", true)) << "recompute " << recompute;
    ASSERT_EQ(reply.tensors.size(), 1u);
    input_grads.push_back(from_wire(reply.tensors[0]).clone());
    EXPECT_EQ(swarm.workers[1]->status().samples_in_step, 4);
    EXPECT_EQ(swarm.workers[1]->status().activations, 0);
  }
  EXPECT_TRUE(torch::equal(outputs[0], outputs[1]));
  EXPECT_TRUE(torch::allclose(input_grads[0], input_grads[1], 0, 1e-7))
      << (input_grads[0] - input_grads[1]).abs().max().item<double>();
  EXPECT_GT(input_grads[1].abs().max().item<double>(), 0);
}

TEST_F(WorkerProtocol, LastStageReturnsLossAndInputGradient) {
  auto fb = make_message(net::ForwardBackward, {{"mb", "t/9"}, {"stage", 1}, {"samples", 4}});
  fb.tensors.push_back(to_wire(torch::randn({4, 16, 32})));
  fb.tensors.push_back(to_wire(tokens()));
  auto reply = stage1_->call(std::move(fb), std::chrono::seconds(10));
  ASSERT_EQ(reply.type, net::ForwardBackwardReply);
  const double loss = runtime::parse_meta(reply).at("loss").get<double>();
  EXPECT_GT(loss, 4.0);  // ~ln(256) for an untrained byte model
  EXPECT_LT(loss, 7.0);
  ASSERT_EQ(reply.tensors.size(), 1u);
  EXPECT_EQ(reply.tensors[0].shape, (std::vector<int64_t>{4, 16, 32}));
  EXPECT_EQ(swarm_->workers[1]->status().samples_in_step, 4);
}

// Activations may come as float32, fp16 or blockwise8 (spec.pipeline.compression of the stage that
// sent them): the last stage's loss on the same hidden states agrees within the codes' error.
TEST_F(WorkerProtocol, CompressedActivationsGiveTheSameLoss) {
  const auto h = torch::randn({4, 16, 32});
  const auto targets = tokens();
  auto loss_of = [&](const runtime::WireCodec& codec) {
    auto fb = make_message(net::ForwardBackward, {{"mb", "t/eval"}, {"stage", 1}, {"samples", 4}, {"eval", true}});
    fb.tensors.push_back(runtime::encode_float(h, codec, "h"));
    fb.tensors.push_back(to_wire(targets));
    return runtime::parse_meta(stage1_->call(std::move(fb), std::chrono::seconds(10))).at("loss").get<double>();
  };
  const double exact = loss_of({Compression::None, 4096});
  EXPECT_NEAR(loss_of({Compression::Fp16, 4096}), exact, 1e-3 * exact);
  EXPECT_NEAR(loss_of({Compression::Blockwise8, 4096}), exact, 1e-2 * exact);
  EXPECT_NEAR(loss_of({Compression::Blockwise8, 16}), exact, 1e-2 * exact);
}

// A forward that waits in the queue past its caller's timeout is answered with an error instead of
// being computed: computed, its activation would never get a backward and the step would wait the
// backward timeout for it (a stall that fed itself after a peer was killed under load).
// On the CPU an arriving float32 activation is computed on where the frame decoder put it: the
// decoder reads the tensor's bytes straight into its WireTensor (worker/net/frame.cc), decode_float
// wraps that memory, and StageCompute hands the same memory to the forward.
TEST(WireToCompute, Float32ActivationsAreUsedInPlace) {
  auto w = net::WireTensor::allocate(net::DType::Float32, {2, 4, 8});
  for (int64_t i = 0; i < w.numel(); ++i) reinterpret_cast<float*>(w.data)[i] = static_cast<float>(i);
  auto t = runtime::decode_float(w, "input");
  EXPECT_EQ(t.data_ptr(), static_cast<void*>(w.data));
  model::StageCompute compute(c10::Device(c10::kCPU), model::Precision::Float32);
  auto on_device = compute.to_device(t);
  EXPECT_EQ(on_device.data_ptr(), static_cast<void*>(w.data));
  EXPECT_EQ(on_device[1][3][7].item<float>(), 63.0f);
  // The tensor keeps the wire buffer alive after the message is gone.
  w = net::WireTensor{};
  EXPECT_EQ(on_device[0][0][5].item<float>(), 5.0f);
}

TEST(WorkerQueue, AForwardWhoseCallerGaveUpIsNotComputed) {
  torch::set_num_threads(1);
  auto spec = testing::tiny_job();  // globalBatch 16, microbatch 4
  spec.timeouts.forward_seconds = 1;
  testing::LocalSwarm swarm(spec, 1);
  net::Client c("127.0.0.1", swarm.workers[0]->port(), testing::kSecret);
  auto forward = [&](const std::string& mb) {
    auto m = make_message(net::Forward, {{"mb", mb}, {"stage", 0}, {"samples", 4}});
    m.tensors.push_back(to_wire(torch::randint(0, 256, {4, 16}, torch::kInt64)));
    return c.call(std::move(m), std::chrono::seconds(20));
  };
  // Four forwards admit the whole global batch; their backwards never come (the trainer is gone).
  for (int i = 0; i < 4; ++i) ASSERT_EQ(forward("q/" + std::to_string(i)).type, net::ForwardReply);
  // The fifth waits for the next step, which waits for those backwards (10 s).
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  try {
    forward("q/late");
  } catch (const net::RemoteError& e) {
    error = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(error.find("not computed"), std::string::npos) << error;
  EXPECT_NE(error.find("spec.timeouts.forwardSeconds"), std::string::npos) << error;
  EXPECT_GE(waited, 0.85);
  EXPECT_LT(waited, 5.0) << "answered only when the step moved on";
}

}  // namespace
}  // namespace swarm
