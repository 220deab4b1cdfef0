// Fuzz target: the blockwise8 decoder (worker/net/blockwise8.h, blockwise8_decode), the part of a
// blockwise8 tensor the frame decoder does not check (the frame decoder checks its block and byte
// count: frame_fuzz.cc). The input is a u16 block size (little-endian) and a tensor's bytes; the
// value count n is the one whose encoding has exactly that many bytes (4 * ceil(n / block) + n),
// and inputs of a size no n fits are skipped. Documented refusal: WireError (a scale that is
// negative or NaN or too large for 127 x scale to be finite, a code of -128). Checked on success:
// every decoded value is finite and within 127 scales of zero, and encoding the decoded values
// again succeeds and reproduces them within the bound.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "worker/net/blockwise8.h"
#include "worker/net/errors.h"

using namespace swarm;

namespace {

// n with blockwise8_bytes(n, block) == size, or -1.
int64_t values_for(uint64_t size, uint32_t block) {
  const uint64_t k = (size + block + 3) / (block + 4);  // blocks: the smallest k with 4k + kB >= size
  for (uint64_t blocks = k > 0 ? k - 1 : 0; blocks <= k + 1; ++blocks) {
    if (4 * blocks > size) break;
    const uint64_t n = size - 4 * blocks;
    if (net::blockwise8_blocks(n, block) == blocks) return static_cast<int64_t>(n);
  }
  return -1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > (1u << 20)) return 0;
  const uint32_t block = data[0] | (data[1] << 8);
  if (block == 0) return 0;  // the frame decoder refuses it before any data is read
  const int64_t n = values_for(size - 2, block);
  if (n < 0) return 0;
  std::vector<float> out(static_cast<size_t>(n));
  try {
    net::blockwise8_decode(data + 2, static_cast<uint64_t>(n), block, out.data(), "tensor[0]");
  } catch (const net::WireError&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::unexpected("blockwise8_decode", e);
  }
  const uint64_t blocks = net::blockwise8_blocks(static_cast<uint64_t>(n), block);
  for (uint64_t b = 0; b < blocks; ++b) {
    float s;
    std::memcpy(&s, data + 2 + 4 * b, 4);
    for (uint64_t i = b * block; i < std::min<uint64_t>(n, (b + 1) * block); ++i)
      if (!std::isfinite(out[i]) || std::fabs(out[i]) > 127.0f * s) fuzz::finding("blockwise8_decode: a value outside its block's range");
  }
  if (block < net::kBlockwise8MinBlock) return 0;  // blockwise8_tensor's own range; decode took it
  std::vector<uint8_t> again(net::blockwise8_bytes(static_cast<uint64_t>(n), block));
  std::vector<float> twice(static_cast<size_t>(n));
  try {
    net::blockwise8_encode(out.data(), static_cast<uint64_t>(n), block, again.data(), "decoded");
    net::blockwise8_decode(again.data(), static_cast<uint64_t>(n), block, twice.data(), "again");
  } catch (const std::exception& e) {
    fuzz::unexpected("blockwise8 re-encode of decoded values", e);
  }
  for (uint64_t b = 0; b < blocks; ++b) {
    float absmax = 0;
    const uint64_t lo = b * block, hi = std::min<uint64_t>(n, lo + block);
    for (uint64_t i = lo; i < hi; ++i) absmax = std::max(absmax, std::fabs(out[i]));
    for (uint64_t i = lo; i < hi; ++i)
      if (std::fabs(out[i] - twice[i]) > absmax / 254.0f * 1.001f + 1e-37f) fuzz::finding("blockwise8: re-encoding a decoded tensor moved a value past the bound");
  }
  return 0;
}
