// Fused CPU kernels for llama's elementwise steps (float32 tensors on the CPU): each runs as one
// pass over memory forward and one backward, where the composite forms take 5 to 7 ATen ops, each
// a pass, with their temporaries saved for the backward (on a stage at hidden 192 those ops were
// 15 % of a forward+backward beside the matmuls). The caller (llama.cc) uses them where
// fused_applies and the composite forms elsewhere (CUDA, bf16 autocast); each throws
// std::invalid_argument for tensors it does not take. Same values as the composite forms up to
// float rounding, in values and gradients (tests/model/llama_test.cc).
// Work is split into a fixed number of chunks, so results do not depend on timing.
#pragma once

#include <ATen/core/Tensor.h>

namespace swarm::model {

// Whether the fused kernels take these tensors: all defined, float32, on the CPU.
bool fused_applies(std::initializer_list<at::Tensor> tensors);

// RMSNorm: x * rsqrt(mean(x^2, -1) + eps) * weight, over the last dimension.
at::Tensor rms_norm_fused(const at::Tensor& x, const at::Tensor& weight, double eps);

// Rotary embedding of x [B, T, heads, d] (last dimension contiguous; any other strides, e.g. a
// slice of a fused projection's output) with tables cos, sin [T, d] whose two halves are equal:
// out = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]. Returns [B, T, heads, d],
// contiguous.
at::Tensor rotary_fused(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// SwiGLU of gate_up [..., 2I] ([gate | up]): silu(gate) * up, [..., I].
at::Tensor swiglu_fused(const at::Tensor& gate_up);

}  // namespace swarm::model
