// What a worker does with each request its compute loop runs (stage_server_impl.h): a forward, a
// forward and backward in one (the last stage, which holds the loss), a backward (recomputing a
// forward whose activations were dropped), and the download of its state by a joiner; the
// inputs checked first, every bad one refused naming what is wrong.
#include <string>

#include "worker/model/state.h"
#include "worker/runtime/protocol.h"
#include "worker/runtime/tensor_wire.h"
#include "worker/stage/stage_server_impl.h"

namespace swarm::runtime {

torch::Tensor StageServer::Impl::check_input(const net::WireTensor& w, const char* what,
                                             int64_t samples) const {
  const bool tokens = stage.load() == 0 || std::string(what) == "targets";
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(std::string(what) + ": " + why);
  };
  auto shape_str = [&] {
    std::string s = "[";
    for (size_t i = 0; i < w.shape.size(); ++i) s += (i ? "," : "") + std::to_string(w.shape[i]);
    return s + "]";
  };
  if (tokens) {
    if (w.dtype != net::DType::Int64) throw fail(std::string("expected int64 token ids, got ") + net::dtype_name(w.dtype));
    if (w.shape.size() != 2) throw fail("expected shape [batch, seq], got " + shape_str());
  } else {
    const auto d = w.dtype;
    if (d != net::DType::Float32 && d != net::DType::Float16 && d != net::DType::BFloat16 && d != net::DType::Blockwise8)
      throw fail(std::string("expected float32, float16, bfloat16 or blockwise8 activations, got ") + net::dtype_name(d));
    if (w.shape.size() != 3 || w.shape[2] != model_cfg.hidden_size)
      throw fail("expected shape [batch, seq, " + std::to_string(model_cfg.hidden_size) + "], got " + shape_str());
  }
  if (w.shape[0] != samples) throw fail("batch " + std::to_string(w.shape[0]) + " != meta.samples " + std::to_string(samples));
  if (w.shape[1] < 1 || w.shape[1] > model_cfg.sequence_length)
    throw fail("sequence length must be in [1, " + std::to_string(model_cfg.sequence_length) + "], got " + shape_str());
  auto t = tokens ? from_wire(w) : decode_float(w, what);
  if (tokens) {
    auto lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
    if (lo < 0 || hi >= model_cfg.vocab_size)
      throw fail("token ids must be in [0, " + std::to_string(model_cfg.vocab_size) + "), got [" +
                 std::to_string(lo) + ", " + std::to_string(hi) + "]");
  } else if (!torch::isfinite(t).all().item<bool>()) {
    throw fail("contains NaN or infinity");
  }
  // On CUDA through a pooled pinned buffer and the copy stream; on the CPU the wire buffer itself.
  return compute->to_device(t);
}

net::Message StageServer::Impl::do_forward(Task& task) {
  const auto& m = task.request;
  if (m.tensors.size() != 1) throw std::invalid_argument("forward: expected 1 tensor, got " + std::to_string(m.tensors.size()));
  int64_t samples = meta_int(task.meta, "samples");
  auto input = check_input(m.tensors[0], "input", samples);
  const bool eval = meta_bool(task.meta, "eval", false);
  torch::Tensor out;
  if (eval) {
    torch::NoGradGuard no_grad;
    out = compute->forward(*model, input);
  } else if (opt.spec.pipeline.recompute_activations) {
    // Only the input is kept; do_backward runs this forward again, with its graph.
    {
      torch::NoGradGuard no_grad;
      out = compute->forward(*model, input);
    }
    activations.put(meta_string(task.meta, "mb"), input, torch::Tensor(), samples, step.load());
  } else {
    if (stage.load() > 0) input = input.detach().requires_grad_(true);
    out = compute->forward(*model, input);
    // A repeated microbatch id replaces the older activations (a trainer retried the forward).
    activations.put(meta_string(task.meta, "mb"), input, out, samples, step.load());
  }
  auto reply = make_message(net::ForwardReply, {{"step", step.load()}});
  // Activations travel as spec.pipeline.compression says, whatever the compute precision.
  reply.tensors.push_back(encode_float(compute->to_host(out, torch::kFloat32), codec, "forward output"));
  return reply;
}

net::Message StageServer::Impl::do_forward_backward(Task& task) {
  const auto& m = task.request;
  if (m.tensors.size() != 2)
    throw std::invalid_argument("forward_backward: expected 2 tensors [input, targets], got " + std::to_string(m.tensors.size()));
  int64_t samples = meta_int(task.meta, "samples");
  auto input = check_input(m.tensors[0], "input", samples);
  auto targets = check_input(m.tensors[1], "targets", samples);
  if (targets.size(1) != input.size(1)) throw std::invalid_argument("targets: sequence length differs from input");
  const bool eval = meta_bool(task.meta, "eval", false);
  if (eval) {
    torch::NoGradGuard no_grad;
    auto loss = model->loss(compute->forward(*model, input), targets);
    return make_message(net::ForwardBackwardReply, {{"step", step.load()}, {"loss", loss.item<double>()}});
  }
  input = input.detach().requires_grad_(true);
  auto loss = model->loss(compute->forward(*model, input), targets);
  // Gradients are summed over samples here and divided by the step's total at averaging time,
  // so microbatches of any size and any number of peers weigh exactly by their samples. With fp16
  // the backward is loss-scaled and the gradients unscaled before they accumulate.
  compute->backward_loss(*model, loss * static_cast<double>(samples), input);
  {
    swarm::MutexLock lk(mu);
    samples_done += samples;
  }
  capacity.add_completed(samples);
  auto reply = make_message(net::ForwardBackwardReply, {{"step", step.load()}, {"loss", loss.item<double>()}});
  reply.tensors.push_back(encode_float(compute->to_host(input.grad(), torch::kFloat32), codec, "input gradient"));
  return reply;
}

net::Message StageServer::Impl::do_backward(Task& task) {
  const auto& m = task.request;
  if (m.tensors.empty() || m.tensors.size() > 2)
    throw std::invalid_argument("backward: expected [grad_output] or [grad_output, input], got " +
                                std::to_string(m.tensors.size()) + " tensors");
  int64_t samples = meta_int(task.meta, "samples");
  const std::string mb = meta_string(task.meta, "mb");
  Activation act;
  bool found = false;
  if (auto kept = activations.take(mb)) {
    act = std::move(*kept);
    found = act.step == step.load();
  }
  if (!found) {
    if (m.tensors.size() < 2) throw net::CodedError(net::ErrorCode::ActivationMissing, kActivationMissing);
    // Recompute the forward from the stage input the trainer kept (failover or expiry).
    act.input = check_input(m.tensors[1], "input", samples);
    if (stage.load() > 0) act.input = act.input.detach().requires_grad_(true);
    act.output = compute->forward(*model, act.input);
    act.samples = samples;
  } else if (!act.output.defined()) {
    // Kept without its graph (spec.pipeline.recomputeActivations): the forward again, at the
    // parameters it first ran with (found: the same step), now with its graph.
    if (stage.load() > 0) act.input = act.input.detach().requires_grad_(true);
    act.output = compute->forward(*model, act.input);
  }
  auto grad = decode_float(m.tensors[0], "grad_output");
  if (grad.sizes() != act.output.sizes()) throw std::invalid_argument("grad_output: expected the forward output's shape");
  compute->backward(*model, act.output, grad, act.input);
  {
    swarm::MutexLock lk(mu);
    samples_done += samples;
  }
  capacity.add_completed(samples);
  auto reply = make_message(net::BackwardReply, {{"step", step.load()}, {"recomputed", !found}});
  if (stage.load() > 0)
    reply.tensors.push_back(encode_float(compute->to_host(act.input.grad(), torch::kFloat32), codec, "input gradient"));
  return reply;
}

net::Message StageServer::Impl::do_state(Task&) {
  auto bytes = model::save_state(*model, *optimizer);
  auto t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  auto reply = make_message(net::StateReply, {{"step", step.load()}, {"stage", stage.load()}});
  reply.tensors.push_back(to_wire(t));
  return reply;
}

bool StageServer::Impl::is_leaving() const {
  swarm::MutexLock lk(mu);
  return leaving;
}

net::Message StageServer::Impl::run_task(Task& task) {
  // A leaving peer admits no new work: forwards, and backwards it would recompute (it holds no
  // claim for them), go to a peer that stays.
  if (is_leaving() && RequestQueue::needs_claim(task, activations.ids(step.load())))
    throw std::runtime_error("peer is leaving stage " + std::to_string(stage.load()));
  switch (task.request.type) {
    case net::Forward: return do_forward(task);
    case net::ForwardBackward: return do_forward_backward(task);
    case net::Backward: return do_backward(task);
    case net::StateRequest: return do_state(task);
  }
  throw std::logic_error("unexpected task type");
}

}  // namespace swarm::runtime
