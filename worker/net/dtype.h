// Element types on the wire. The numeric values are part of the wire contract.
#pragma once

#include <cstddef>
#include <cstdint>

namespace swarm::net {

enum class DType : uint8_t {
  Float32 = 1,
  Float16 = 2,
  BFloat16 = 3,
  Int64 = 4,
  Int32 = 5,
  UInt8 = 6,
  Float64 = 7,
  Int8 = 8,
};

// Bytes per element; 0 for a value that is not a known DType.
size_t dtype_size(DType t);
// "float32", "float16", ...; "unknown" for a value that is not a known DType.
const char* dtype_name(DType t);
// True when `raw` is the value of a known DType.
bool dtype_known(uint8_t raw);

// numel(dims) * dtype_size(t) into *out; false when t is unknown, a dim is negative, or the
// element count or the byte count overflows uint64.
bool checked_nbytes(DType t, const int64_t* dims, size_t ndim, uint64_t* out);

}  // namespace swarm::net
