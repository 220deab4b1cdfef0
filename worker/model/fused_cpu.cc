#include "worker/model/fused_cpu.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace swarm::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows are split into this many chunks whatever the thread count, so a reduction over rows (the
// RMSNorm weight's gradient) adds the same partial sums in the same order on every machine.
constexpr int64_t kChunks = 16;

// Calls fn(begin_row, end_row, chunk) for each of the chunks of `rows`, on libtorch's threads.
template <class Fn>
void for_chunks(int64_t rows, int64_t chunks, const Fn& fn) {
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) fn(rows * c / chunks, rows * (c + 1) / chunks, c);
  });
}

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w_in, double eps) {
    const auto x = x_in.contiguous();
    const auto w = w_in.contiguous();
    const int64_t n = x.size(-1), rows = x.numel() / n;
    auto y = at::empty_like(x);
    auto r = at::empty({rows}, x.options());
    const float* px = x.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    float* py = y.data_ptr<float>();
    float* pr = r.data_ptr<float>();
    for_chunks(rows, std::min(rows, kChunks), [&](int64_t begin, int64_t end, int64_t) {
      for (int64_t i = begin; i < end; ++i) {
        const float* xi = px + i * n;
        double ss = 0;
        for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(xi[j]) * xi[j];
        const float ri = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
        pr[i] = ri;
        float* yi = py + i * n;
        for (int64_t j = 0; j < n; ++j) yi[j] = pw[j] * (xi[j] * ri);
      }
    });
    ctx->save_for_backward({x, w, r});
    return y;
  }

  // y_j = w_j x_j r, r = (mean(x^2) + eps)^-1/2: dx_k = r w_k g_k - r^3 x_k / n * sum_j g_j w_j x_j,
  // dw_j = sum over rows of g_j x_j r.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &r = saved[2];
    const auto g = grads[0].contiguous();
    const int64_t n = x.size(-1), rows = x.numel() / n, chunks = std::min(rows, kChunks);
    auto gx = at::empty_like(x);
    auto partial = at::zeros({chunks, n}, x.options());
    const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pr = r.data_ptr<float>(),
                *pg = g.data_ptr<float>();
    float* pgx = gx.data_ptr<float>();
    float* ppart = partial.data_ptr<float>();
    for_chunks(rows, chunks, [&](int64_t begin, int64_t end, int64_t c) {
      float* gw = ppart + c * n;
      for (int64_t i = begin; i < end; ++i) {
        const float *xi = px + i * n, *gi = pg + i * n;
        const float ri = pr[i];
        double dot = 0;
        for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(gi[j]) * pw[j] * xi[j];
        const float k = static_cast<float>(dot * ri * ri * ri / static_cast<double>(n));
        float* gxi = pgx + i * n;
        for (int64_t j = 0; j < n; ++j) {
          gxi[j] = ri * pw[j] * gi[j] - k * xi[j];
          gw[j] += gi[j] * xi[j] * ri;
        }
      }
    });
    return {gx, partial.sum(0).view(w.sizes()), at::Tensor()};
  }
};

struct RotaryFn : public torch::autograd::Function<RotaryFn> {
  // out1 = x1 c - x2 s, out2 = x2 c + x1 s (halves 1 and 2 of each head); `sign` -1 turns the
  // other way, which is the backward (the rotation's transpose).
  static void rotate(const float* x, const int64_t x_strides[3], const float* cos, const float* sin, float* out,
                     int64_t B, int64_t T, int64_t H, int64_t d, float sign) {
    const int64_t half = d / 2;
    for_chunks(B * T, std::min(B * T, kChunks), [&](int64_t begin, int64_t end, int64_t) {
      for (int64_t bt = begin; bt < end; ++bt) {
        const int64_t b = bt / T, t = bt % T;
        const float *c = cos + t * d, *s = sin + t * d;
        for (int64_t h = 0; h < H; ++h) {
          const float* xh = x + b * x_strides[0] + t * x_strides[1] + h * x_strides[2];
          float* oh = out + ((b * T + t) * H + h) * d;
          for (int64_t i = 0; i < half; ++i) {
            const float x1 = xh[i], x2 = xh[i + half], si = sign * s[i];
            oh[i] = x1 * c[i] - x2 * si;
            oh[i + half] = x2 * c[i] + x1 * si;
          }
        }
      }
    });
  }

  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos_in,
                            const at::Tensor& sin_in) {
    const auto cos = cos_in.contiguous(), sin = sin_in.contiguous();
    const int64_t B = x.size(0), T = x.size(1), H = x.size(2), d = x.size(3);
    const auto src = x.stride(3) == 1 ? x : x.contiguous();
    auto out = at::empty({B, T, H, d}, x.options());
    const int64_t strides[3] = {src.stride(0), src.stride(1), src.stride(2)};
    rotate(src.data_ptr<float>(), strides, cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<float>(), B, T, H,
           d, 1.0f);
    ctx->save_for_backward({cos, sin});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto g = grads[0].contiguous();
    const int64_t B = g.size(0), T = g.size(1), H = g.size(2), d = g.size(3);
    auto gx = at::empty_like(g);
    const int64_t strides[3] = {g.stride(0), g.stride(1), g.stride(2)};
    rotate(g.data_ptr<float>(), strides, saved[0].data_ptr<float>(), saved[1].data_ptr<float>(), gx.data_ptr<float>(),
           B, T, H, d, -1.0f);
    return {gx, at::Tensor(), at::Tensor()};
  }
};

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gu_in) {
    const auto gu = gu_in.contiguous();
    const int64_t width = gu.size(-1) / 2, rows = gu.numel() / gu.size(-1);
    auto sizes = gu.sizes().vec();
    sizes.back() = width;
    auto out = at::empty(sizes, gu.options());
    const float* in = gu.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for_chunks(rows, std::min(rows, kChunks), [&](int64_t begin, int64_t end, int64_t) {
      for (int64_t i = begin; i < end; ++i) {
        const float *a = in + i * 2 * width, *u = a + width;
        float* oi = o + i * width;
        for (int64_t j = 0; j < width; ++j) oi[j] = a[j] / (1.0f + std::exp(-a[j])) * u[j];
      }
    });
    ctx->save_for_backward({gu});
    return out;
  }

  // silu(a) = a s, s = sigmoid(a); d silu / da = s (1 + a (1 - s)).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto gu = ctx->get_saved_variables()[0];
    const auto g = grads[0].contiguous();
    const int64_t width = gu.size(-1) / 2, rows = gu.numel() / gu.size(-1);
    auto ggu = at::empty_like(gu);
    const float *in = gu.data_ptr<float>(), *pg = g.data_ptr<float>();
    float* out = ggu.data_ptr<float>();
    for_chunks(rows, std::min(rows, kChunks), [&](int64_t begin, int64_t end, int64_t) {
      for (int64_t i = begin; i < end; ++i) {
        const float *a = in + i * 2 * width, *u = a + width, *gi = pg + i * width;
        float *ga = out + i * 2 * width, *gup = ga + width;
        for (int64_t j = 0; j < width; ++j) {
          const float s = 1.0f / (1.0f + std::exp(-a[j]));
          ga[j] = gi[j] * u[j] * s * (1.0f + a[j] * (1.0f - s));
          gup[j] = gi[j] * a[j] * s;
        }
      }
    });
    return {ggu};
  }
};

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string(what) + ": needs defined float32 CPU tensors (fused_applies)");
}

}  // namespace

bool fused_applies(std::initializer_list<at::Tensor> tensors) {
  for (const auto& t : tensors) {
    if (!t.defined() || !t.is_cpu() || t.scalar_type() != at::kFloat) return false;
  }
  return true;
}

at::Tensor rms_norm_fused(const at::Tensor& x, const at::Tensor& weight, double eps) {
  require(fused_applies({x, weight}) && weight.numel() == x.size(-1), "rms_norm_fused");
  return RmsNormFn::apply(x, weight, eps);
}

at::Tensor rotary_fused(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  require(fused_applies({x, cos, sin}) && x.dim() == 4 && x.size(3) % 2 == 0 && cos.size(0) == x.size(1) &&
              cos.size(1) == x.size(3) && sin.sizes() == cos.sizes(),
          "rotary_fused");
  return RotaryFn::apply(x, cos, sin);
}

at::Tensor swiglu_fused(const at::Tensor& gate_up) {
  require(fused_applies({gate_up}) && gate_up.size(-1) % 2 == 0, "swiglu_fused");
  return SwigluFn::apply(gate_up);
}

}  // namespace swarm::model
