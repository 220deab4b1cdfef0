// stage_bench: forward+backward throughput of one pipeline stage against the device's measured
// matmul peak. Built with the model library only (works in a -DSWARM_MODEL_ONLY=ON build).
//
//   stage_bench --hidden 1024,2048,4096 --layers 4 --seq 2048 --batch 4 --precision bf16 \
//               --device cuda --iters 10
//   stage_bench --hidden 192 --head-dim 32 --batch 8 --threads 1 --precision fp32 --profile 20
//                                           # + a per-op profile (libtorch's profiler) of fwd+bwd
//   stage_bench --arch llama --kv-heads 2 --intermediate 512 --hidden 192 --head-dim 32 --threads 1
//                                           # a llama stage (grouped-query attention, SwiGLU, rotary)
//   stage_bench --check --device cuda       # quick self-test of autocast + staging on the device,
//                                           # and of a worker's request path (StageCompute)
//
// Peak: an N^3 matmul (N = --peak-size, 8192 on a GPU) in the compute dtype, timed over >= 0.5 s.
// Stage: a middle stage (of 3: no embedding, no LM head) of --arch gpt2 (mlp = --mlp x hidden) or
// llama (--kv-heads k/v heads, 0 = num_heads; SwiGLU width --intermediate, 0 = --mlp x hidden), with
// num_heads = hidden / head_dim,
// parameters float32, forward under ComputeScope (autocast), backward outside it, as a worker
// runs it. FLOPs: stage_flops_per_sample (planner/flops.h) x batch for the forward, 3x that
// for forward+backward. Times: torch::cuda::synchronize + steady_clock around --iters iterations
// after --warmup ones. Each result is also printed as one "RESULT key=value ..." line.
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/stage_profile.h"
#include "planner/flops.h"
#include "worker/model/device.h"
#include "worker/model/precision.h"
#include "worker/model/stage.h"
#include "worker/model/stage_compute.h"
#include "worker/model/staging.h"

namespace sm = swarm::model;

namespace {

struct Args {
  std::vector<int64_t> hidden;
  int64_t layers = -1, seq = -1, batch = -1, iters = -1, warmup = -1, peak_size = -1;
  int64_t head_dim = 128, vocab = 256, mlp = 4, threads = 0, profile = 0, profile_rows = 18;
  int64_t kv_heads = 0, intermediate = 0;  // llama; 0 = num_heads / mlp x hidden
  std::string precision = "bf16", device = "auto", arch = "gpt2";
  bool check = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "stage_bench: %s\nusage: stage_bench [--hidden H1,H2,..] [--layers L] [--seq T] "
               "[--batch B]\n  [--precision auto|fp32|bf16|fp16] [--device auto|cpu|cuda|cuda:N] "
               "[--iters N] [--warmup N]\n  [--head-dim D] [--peak-size N] [--threads N] [--profile ITERS] "
               "[--profile-rows N] [--check]\n  [--arch gpt2|llama] [--kv-heads N] [--intermediate N] [--mlp N]\n",
               why.c_str());
  std::exit(2);
}

int64_t to_int(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size() || x <= 0) throw std::invalid_argument("");
    return x;
  } catch (const std::exception&) {
    usage(flag + " needs a positive integer, got '" + v + "'");
  }
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--check") { a.check = true; continue; }
    if (f == "-h" || f == "--help") usage("help");
    if (i + 1 >= argc) usage("missing value after " + f);
    const std::string v = argv[++i];
    if (f == "--hidden") {
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) a.hidden.push_back(to_int(f, item));
    } else if (f == "--layers") a.layers = to_int(f, v);
    else if (f == "--seq") a.seq = to_int(f, v);
    else if (f == "--batch") a.batch = to_int(f, v);
    else if (f == "--iters") a.iters = to_int(f, v);
    else if (f == "--warmup") a.warmup = to_int(f, v);
    else if (f == "--head-dim") a.head_dim = to_int(f, v);
    else if (f == "--peak-size") a.peak_size = to_int(f, v);
    else if (f == "--threads") a.threads = to_int(f, v);
    else if (f == "--profile") a.profile = to_int(f, v);
    else if (f == "--profile-rows") a.profile_rows = to_int(f, v);
    else if (f == "--kv-heads") a.kv_heads = to_int(f, v);
    else if (f == "--intermediate") a.intermediate = to_int(f, v);
    else if (f == "--mlp") a.mlp = to_int(f, v);
    else if (f == "--arch") {
      if (v != "gpt2" && v != "llama") usage("--arch must be gpt2 or llama, got '" + v + "'");
      a.arch = v;
    }
    else if (f == "--precision") a.precision = v;
    else if (f == "--device") a.device = v;
    else usage("unknown flag " + f);
  }
  return a;
}

void sync(const c10::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

// Seconds per call of fn: `warmup` untimed calls, then `iters` timed ones.
double time_per_call(const c10::Device& d, int64_t warmup, int64_t iters,
                     const std::function<void()>& fn) {
  for (int64_t i = 0; i < warmup; ++i) fn();
  sync(d);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) fn();
  sync(d);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(iters);
}

double measure_peak(const c10::Device& d, c10::ScalarType dtype, int64_t n) {
  torch::NoGradGuard no_grad;
  auto opts = torch::TensorOptions().dtype(dtype).device(d);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts), c = torch::empty({n, n}, opts);
  auto mm = [&] { at::mm_out(c, a, b); };
  double s = time_per_call(d, 2, 3, mm);
  const int64_t reps = std::max<int64_t>(3, std::min<int64_t>(500, static_cast<int64_t>(0.5 / s)));
  s = time_per_call(d, 0, reps, mm);
  return 2.0 * n * n * n / s;
}

sm::ModelConfig stage_config(const Args& a, int64_t hidden) {
  sm::ModelConfig c;
  c.vocab_size = a.vocab;
  c.hidden_size = hidden;
  c.num_heads = std::max<int64_t>(1, hidden / a.head_dim);
  c.sequence_length = a.seq;
  c.num_stages = 3;
  c.set_uniform_layers(a.layers);
  const int64_t width = a.intermediate > 0 ? a.intermediate : a.mlp * hidden;
  if (a.arch == "llama") {
    c.architecture = sm::Architecture::Llama;
    c.llama.intermediate_size = width;
    c.llama.num_kv_heads = a.kv_heads > 0 ? a.kv_heads : c.num_heads;
    c.llama.head_dim = a.head_dim;
  } else {
    c.gpt2.intermediate_size = width;
  }
  sm::validate(c);
  return c;
}

// What planner/flops.h costs for stage 1 of `c`.
swarm::planner::StageShape stage_shape(const sm::ModelConfig& c) {
  swarm::planner::StageShape s;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.layers = c.layers_in(1);
  s.sequence_length = c.sequence_length;
  s.intermediate_size = c.intermediate_size();
  s.num_heads = c.num_heads;
  s.kv_heads = c.kv_heads();
  s.head_dim = c.head_dim();
  s.gated_mlp = c.is_llama();
  return s;
}

double rel(const torch::Tensor& err, const torch::Tensor& ref) {
  return (err.to(torch::kDouble).norm() / ref.to(torch::kDouble).norm()).item<double>();
}

// Quick self-test on the device: staging round trip (side stream on CUDA), autocast close to
// float32 for a small stage, loss scaler arithmetic. Returns the number of failures.
int run_check(const c10::Device& d) {
  int failures = 0;
  auto report = [&](const char* what, bool ok, const std::string& detail) {
    std::printf("check %-28s %s  %s\n", what, ok ? "OK  " : "FAIL", detail.c_str());
    failures += ok ? 0 : 1;
  };
  sm::HostStaging staging;
  auto side = sm::HostStaging::copy_stream(d);
  bool same = true;
  for (int r = 0; r < 3; ++r) {
    auto x = torch::randn({256, 1024});
    auto on = staging.to_device_async(x, d, side);
    auto back = staging.to_host_async(on * 2, side);
    back.wait();
    same = same && torch::equal(back.tensor, x * 2);
  }
  report("staging round trip", same,
         std::string("pinned=") + (staging.pinned() ? "yes" : "no") + " reuses=" +
             std::to_string(staging.stats().reuses));

  sm::ModelConfig c;
  c.hidden_size = 256, c.num_heads = 4, c.sequence_length = 128;
  c.num_stages = 3;
  c.set_uniform_layers(2);
  c.gpt2.intermediate_size = 4 * c.hidden_size;
  auto stage = sm::make_stage(c, 1, 1);
  stage->to(d);
  auto x = torch::randn({4, 128, 256}, torch::TensorOptions().device(d));
  auto y32 = stage->forward(x).detach();
  for (auto p : {sm::Precision::BFloat16, sm::Precision::Float16}) {
    if (sm::effective_precision(d, p) != p) continue;
    torch::Tensor y;
    {
      sm::ComputeScope scope(d, p);
      y = stage->forward(x);
    }
    y.sum().backward();
    const double e = rel(y.detach().to(torch::kFloat) - y32, y32 - x);
    std::ostringstream os;
    os << "rel. error of the stage's update " << e << " (< 4e-2)";
    report(p == sm::Precision::BFloat16 ? "autocast bf16 vs fp32" : "autocast fp16 vs fp32",
           e < 4e-2, os.str());
  }
  sm::LossScaler scaler;
  auto g = torch::full({8}, 1e-8).to(d);
  std::vector<torch::Tensor> grads{scaler.scale_grad(g).to(torch::kHalf).to(torch::kFloat)};
  scaler.unscale_(grads);
  report("loss scaler fp16 rescue", sm::LossScaler::all_finite(grads) &&
                                        std::abs(grads[0][0].item<double>() - 1e-8) < 1e-11,
         "1e-8 survives fp16 when scaled by 2^16");

  // A worker's request path (worker/model/stage_compute.h), as stage_server.cc runs it: host input
  // staged to the device, forward under autocast, (loss-scaled for fp16) backward from a host
  // gradient, output and input gradient back to float32 host tensors. After the first requests the
  // staging pool must not grow (every later request reuses its buffers).
  for (auto p : {sm::Precision::BFloat16, sm::Precision::Float16}) {
    if (sm::effective_precision(d, p) != p) continue;
    sm::StageCompute compute(d, p);
    auto host_x = torch::randn({4, 128, 256});
    auto host_g = torch::randn({4, 128, 256});
    stage->zero_grad();
    auto ref_in = host_x.to(d).requires_grad_(true);
    auto ref_out = stage->forward(ref_in);
    ref_out.backward(host_g.to(d));
    const auto ref_y = ref_out.detach().cpu(), ref_gx = ref_in.grad().cpu();
    int64_t warm_allocations = 0;
    double err_y = 0, err_gx = 0;
    bool finite = true;
    for (int r = 0; r < 12; ++r) {
      stage->zero_grad();
      auto in = compute.to_device(host_x).detach().requires_grad_(true);
      auto out = compute.forward(*stage, in);
      compute.backward(*stage, out, host_g, in);
      auto y = compute.to_host(out);
      auto gx = compute.to_host(in.grad());
      finite = finite && torch::isfinite(gx).all().item<bool>();
      err_y = std::max(err_y, rel(y - ref_y, ref_y - host_x));
      err_gx = std::max(err_gx, rel(gx - ref_gx, ref_gx - host_g));
      if (r == 1) warm_allocations = compute.staging_stats().allocations;
    }
    const auto st = compute.staging_stats();
    const bool no_growth = st.allocations == warm_allocations && (d.is_cuda() ? st.reuses >= 30 : true);
    std::ostringstream os;
    os << compute.describe() << ": rel. error out " << err_y << ", input grad " << err_gx
       << " (< 4e-2); staging allocations " << st.allocations << " (after warm-up " << warm_allocations
       << "), reuses " << st.reuses << (d.is_cuda() ? "" : " (CPU: zero-copy, no staging)");
    report(p == sm::Precision::BFloat16 ? "worker path bf16" : "worker path fp16 + scaler",
           finite && err_y < 4e-2 && err_gx < 4e-2 && no_growth, os.str());
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  c10::Device device(c10::kCPU);
  sm::Precision precision;
  try {
    device = sm::pick_device(a.device);
    precision = sm::pick_precision(a.precision, device);
  } catch (const std::exception& e) {
    usage(e.what());
  }
  const bool gpu = device.is_cuda();
  torch::set_num_threads(a.threads > 0 ? static_cast<int>(a.threads)
                                       : static_cast<int>(std::thread::hardware_concurrency()));
  const auto eff = sm::effective_precision(device, precision);
  std::printf("stage_bench: libtorch %s (CUDA build: %s, CUDA available: %s), device %s = %s, "
              "precision %s%s\n",
              TORCH_VERSION, sm::built_with_cuda() ? "yes" : "no",
              torch::cuda::is_available() ? "yes" : "no", device.str().c_str(),
              gpu ? "GPU" : "CPU (NOT a GPU figure)", sm::precision_name(eff),
              eff != precision ? " (fp16 autocast is CUDA-only: fell back)" : "");
  if (a.check) return run_check(device) == 0 ? 0 : 1;

  // Defaults: GPU-sized on CUDA, small on the CPU.
  if (a.hidden.empty()) a.hidden = gpu ? std::vector<int64_t>{1024, 2048, 4096}
                                       : std::vector<int64_t>{128, 256, 512};
  if (a.layers < 0) a.layers = gpu ? 4 : 2;
  if (a.seq < 0) a.seq = gpu ? 2048 : 128;
  if (a.batch < 0) a.batch = 4;
  if (a.iters < 0) a.iters = gpu ? 10 : 3;
  if (a.warmup < 0) a.warmup = gpu ? 3 : 1;
  if (a.peak_size < 0) a.peak_size = gpu ? 8192 : 1024;

  const auto dtype = sm::precision_dtype(eff);
  const double peak = measure_peak(device, dtype, a.peak_size);
  std::printf("peak: %s matmul %lld^3 on %s (%d threads): %.1f GFLOP/s\n", sm::precision_name(eff),
              static_cast<long long>(a.peak_size), gpu ? "GPU" : "CPU", torch::get_num_threads(),
              peak / 1e9);
  std::printf("RESULT kind=peak device=%s precision=%s n=%lld tflops=%.2f\n", device.str().c_str(),
              sm::precision_name(eff), static_cast<long long>(a.peak_size), peak / 1e12);
  std::printf("one middle %s stage: %lld layers, seq %lld, batch %lld, mlp %s, head dim %lld%s; "
              "fwd+bwd FLOPs = 3 x forward (flops.h)\n",
              a.arch.c_str(), static_cast<long long>(a.layers), static_cast<long long>(a.seq),
              static_cast<long long>(a.batch),
              a.intermediate > 0 ? std::to_string(a.intermediate).c_str() : (std::to_string(a.mlp) + " x hidden").c_str(),
              static_cast<long long>(a.head_dim),
              a.arch == "llama" ? (", kv heads " + (a.kv_heads > 0 ? std::to_string(a.kv_heads) : std::string("= heads"))).c_str() : "");
  std::printf("%7s %6s %10s %9s %13s %15s %9s\n", "hidden", "heads", "params(M)", "fwd ms",
              "fwd+bwd ms", "fwd+bwd GFLOP/s", "of peak");
  for (const int64_t hidden : a.hidden) {
    sm::ModelConfig c;
    try {
      c = stage_config(a, hidden);
    } catch (const std::exception& e) {
      std::printf("%7lld  skipped: %s\n", static_cast<long long>(hidden), e.what());
      continue;
    }
    auto stage = sm::make_stage(c, 1, 1);
    stage->to(device);
    int64_t params = 0;
    for (auto& p : stage->parameters()) params += p.numel();
    auto opts = torch::TensorOptions().device(device);
    auto x = torch::randn({a.batch, a.seq, hidden}, opts).requires_grad_(true);
    auto g = torch::randn({a.batch, a.seq, hidden}, opts);
    const double fwd = time_per_call(device, a.warmup, a.iters, [&] {
      torch::NoGradGuard no_grad;
      sm::ComputeScope scope(device, eff);
      stage->forward(x);
    });
    const auto forward_backward = [&] {
      torch::Tensor y;
      {
        sm::ComputeScope scope(device, eff);
        y = stage->forward(x);
      }
      y.backward(g);  // gradients accumulate, as over a step's microbatches
    };
    const double fwd_bwd = time_per_call(device, a.warmup, a.iters, forward_backward);
    const double flops = 3.0 * swarm::planner::stage_flops_per_sample(stage_shape(c), false) * a.batch;
    const double tflops = flops / fwd_bwd / 1e12;
    std::printf("%7lld %6lld %10.1f %9.2f %13.2f %15.1f %8.1f%%\n", static_cast<long long>(hidden),
                static_cast<long long>(c.num_heads), params / 1e6, fwd * 1e3, fwd_bwd * 1e3,
                tflops * 1e3, 100.0 * tflops * 1e12 / peak);
    std::printf("RESULT kind=stage arch=%s device=%s precision=%s hidden=%lld layers=%lld seq=%lld "
                "batch=%lld fwd_bwd_ms=%.3f tflops=%.2f frac_of_peak=%.3f\n",
                a.arch.c_str(), device.str().c_str(), sm::precision_name(eff), static_cast<long long>(hidden),
                static_cast<long long>(a.layers), static_cast<long long>(a.seq),
                static_cast<long long>(a.batch), fwd_bwd * 1e3, tflops, tflops * 1e12 / peak);
    if (a.profile > 0) {
      if (gpu) sync(device);
      double wall_ms = 0;
      const auto rows = swarm::bench::profile_ops(forward_backward, a.profile, &wall_ms);
      swarm::bench::print_op_profile(rows, wall_ms, static_cast<size_t>(a.profile_rows));
    }
    std::fflush(stdout);
  }
  if (gpu && TORCH_VERSION_MAJOR >= 2) {
    std::printf("note: on CUDA attention runs as causal scaled_dot_product_attention, which skips "
                "the masked half of the T x T products that flops.h counts.\n");
  }
  return 0;
}
