// Causal self-attention cores shared by the architectures (transformer.h: gpt2, llama.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace swarm::model {

// Causal (grouped-query) attention. q: [B,nh,T,hd]; k, v: [B,nkv,T,hd] with nkv dividing nh
// (query head h reads k/v head h / (nh / nkv), Hugging Face's repeat_kv order). Returns
// [B,T,nh*hd]. Position t attends to positions <= t.
// libtorch 2.x: the fused scaled_dot_product_attention on every device (flash attention on the
// CPU: blockwise online softmax, no T x T tensors, the masked half skipped), k/v heads shared
// through its enable_gqa; 1.13: explicit_causal_attention. Reduced-precision inputs on the CPU
// (bf16 autocast) run the core in float32 and return the input's dtype.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// gpt2's fused layout: qkv [B,T,3H] ([q | k | v], heads of H / num_heads) -> [B,T,H].
at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t num_heads);

// The unfused form: softmax(q k^T / sqrt(d) + causal mask) v with the T x T tensors materialized,
// k/v heads repeated for grouped-query attention. Shapes as causal_attention. The reference the
// fused path is tested against.
at::Tensor explicit_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace swarm::model
