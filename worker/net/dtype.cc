#include "worker/net/dtype.h"

namespace swarm::net {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Int64: return 8;
    case DType::Int32: return 4;
    case DType::UInt8: return 1;
    case DType::Float64: return 8;
    case DType::Int8: return 1;
    case DType::Blockwise8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
    case DType::Float64: return "float64";
    case DType::Int8: return "int8";
    case DType::Blockwise8: return "blockwise8";
  }
  return "unknown";
}

bool dtype_known(uint8_t raw) { return dtype_size(static_cast<DType>(raw)) != 0; }

bool checked_nbytes(DType t, const int64_t* dims, size_t ndim, uint64_t* out, uint32_t block) {
  uint64_t n = dtype_size(t);
  if (n == 0 || (t == DType::Blockwise8 && block == 0)) return false;
  bool zero = false;
  for (size_t i = 0; i < ndim; ++i) {
    if (dims[i] < 0) return false;
    if (dims[i] == 0) zero = true;
  }
  if (zero) {  // a zero-size tensor: other dims may be anything non-negative
    *out = 0;
    return true;
  }
  for (size_t i = 0; i < ndim; ++i) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(dims[i]), &n)) return false;
  }
  if (t == DType::Blockwise8) {  // n is the element count: add a float32 scale per block
    const uint64_t blocks = n / block + (n % block != 0);
    if (__builtin_add_overflow(n, 4 * blocks, &n)) return false;
  }
  *out = n;
  return true;
}

}  // namespace swarm::net
