#include "worker/model/attention.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

namespace swarm::model {
namespace {

// k/v heads repeated so that query head h reads k/v head h / groups (repeat_interleave on the head
// dimension: Hugging Face's repeat_kv).
at::Tensor repeat_kv(const at::Tensor& t, int64_t groups) {
  return groups == 1 ? t : t.repeat_interleave(groups, 1);
}

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t B = q.size(0), nh = q.size(1), T = q.size(2), hd = q.size(3);
  const bool gqa = k.size(1) != nh;
#if TORCH_VERSION_MAJOR >= 2
  if (q.is_cpu() && q.scalar_type() != torch::kFloat) {
    // bf16/fp16 autocast on the CPU: the flash kernel's reduced-precision backward is slow there
    // (measured with libtorch 2.11: 25 ms of a 48 ms bf16 stage step, 3x its float32 time), so the
    // attention core runs in float32, outside autocast, and returns in the input's dtype.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
    auto y = at::scaled_dot_product_attention(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), {},
                                              0.0, /*is_causal=*/true, std::nullopt, gqa);
    return y.to(q.scalar_type()).transpose(1, 2).reshape({B, T, nh * hd});
  }
  auto y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, gqa);
  return y.transpose(1, 2).reshape({B, T, nh * hd});
#else
  // libtorch 1.13 (Debian's, -DSWARM_TORCH_CMAKE_PREFIX= builds) has no fused attention.
  (void)B, (void)T, (void)hd, (void)gqa;
  return explicit_causal_attention(q, k, v);
#endif
}

at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t num_heads) {
  const int64_t B = qkv.size(0), T = qkv.size(1), H = qkv.size(2) / 3;
  const int64_t hd = H / num_heads;
  // [B,T,3H] -> three [B,nh,T,hd] views (no copies). unbind, not parts[i]: its backward is one
  // stack into the qkv gradient, where three selects would each zero a qkv-sized gradient, copy
  // their part in and add the three up.
  auto parts = qkv.view({B, T, 3, num_heads, hd}).unbind(2);
  return causal_attention(parts[0].transpose(1, 2), parts[1].transpose(1, 2), parts[2].transpose(1, 2));
}

at::Tensor explicit_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t B = q.size(0), nh = q.size(1), T = q.size(2), hd = q.size(3);
  const int64_t groups = nh / k.size(1);
  auto scores = torch::matmul(q, repeat_kv(k, groups).transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  auto future = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  auto att = torch::softmax(scores, -1);
  auto y = torch::matmul(att, repeat_kv(v, groups));  // [B,nh,T,hd]
  return y.transpose(1, 2).reshape({B, T, nh * hd});
}

}  // namespace swarm::model
