// Blockwise 8-bit quantization of float32 tensors on the wire (dtype blockwise8, docs/architecture.md
// "Compression").
//
// Linear absmax code: the values are cut into blocks of `block` consecutive elements (the last block
// may be shorter); each block is sent as one float32 scale s = absmax(block) / 127 and one int8 code
// per value, round(x / s) in [-127, 127]; the receiver decodes x' = code * s. The error of every
// value is at most s / 2 = absmax(block) / 254 (plus float rounding). A block of zeros has s = 0.
//
// Bytes of a blockwise8 tensor of n values: f32 scales[ceil(n / block)] | i8 codes[n], so
// 4 * ceil(n / block) + n in all (about 0.25 x float32 for block 4096). The block size travels in
// the tensor's descriptor (its u16 field), so a reader checks nbytes against the shape before it
// reads a byte of data.
//
// Encoding refuses inf and NaN (std::invalid_argument naming the value's index): a non-finite value
// would spoil its block's scale, so it is never sent. Decoding refuses a scale that is negative or
// NaN or whose 127 x is not finite, and a code of -128 (WireError naming the block): every decoded
// value is finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/net/message.h"

namespace swarm::net {

constexpr uint32_t kBlockwise8DefaultBlock = 4096;
constexpr uint32_t kBlockwise8MinBlock = 16;
constexpr uint32_t kBlockwise8MaxBlock = 65535;  // the descriptor's u16

// Number of blocks and bytes of the encoding of n values (block >= 1).
uint64_t blockwise8_blocks(uint64_t n, uint32_t block);
uint64_t blockwise8_bytes(uint64_t n, uint32_t block);

// Encodes n values into `out` (blockwise8_bytes(n, block) bytes). `what` names the tensor in the
// error for a non-finite value, e.g. "forward output: value 17 is nan".
void blockwise8_encode(const float* x, uint64_t n, uint32_t block, uint8_t* out, const std::string& what);

// Decodes `in` (blockwise8_bytes(n, block) bytes) into n floats.
void blockwise8_decode(const uint8_t* in, uint64_t n, uint32_t block, float* out, const std::string& what);

// A wire tensor of dtype blockwise8 holding x's n = numel(shape) values.
WireTensor blockwise8_tensor(const float* x, std::vector<int64_t> shape, uint32_t block, const std::string& what);

}  // namespace swarm::net
