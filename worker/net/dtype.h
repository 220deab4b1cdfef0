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
  Blockwise8 = 9,  // float32 values sent as int8 codes with a scale per block (blockwise8.h)
};

// Bytes per element; 0 for a value that is not a known DType. Blockwise8: 1 (its code; each block
// adds a 4-byte scale, see checked_nbytes).
size_t dtype_size(DType t);
// "float32", "float16", ...; "unknown" for a value that is not a known DType.
const char* dtype_name(DType t);
// True when `raw` is the value of a known DType.
bool dtype_known(uint8_t raw);

// The bytes of a tensor of shape dims into *out: numel(dims) * dtype_size(t), and for Blockwise8
// 4 * ceil(numel / block) more (its scales); false when t is unknown, a dim is negative, the
// element count or the byte count overflows uint64, or block is 0 for Blockwise8 (`block` is
// ignored for every other dtype).
bool checked_nbytes(DType t, const int64_t* dims, size_t ndim, uint64_t* out, uint32_t block = 0);

}  // namespace swarm::net
