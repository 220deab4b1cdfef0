#include "worker/net/blockwise8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "worker/net/errors.h"

// The inner loops are plain loops that the compiler vectorizes; with GCC each gets an AVX2 clone
// chosen at load time (the baseline build targets x86-64 without AVX).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SWARM_VECTOR_CLONES __attribute__((target_clones("avx2", "default"), optimize("O3")))
#else
#define SWARM_VECTOR_CLONES
#endif

namespace swarm::net {
namespace {

// The largest |x| of a block as float bits (for finite non-negative floats the order of the bits
// is the order of the values; inf and NaN have bits >= 0x7f800000, so one maximum finds them too).
SWARM_VECTOR_CLONES uint32_t abs_bits_max(const float* x, uint32_t n) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    b &= 0x7fffffffu;
    m = b > m ? b : m;
  }
  return m;
}

SWARM_VECTOR_CLONES void quantize(const float* x, uint32_t n, float inv, int8_t* q) {
  for (uint32_t i = 0; i < n; ++i) {
    float v = x[i] * inv;                 // in [-127, 127] up to rounding
    v += v >= 0.0f ? 0.5f : -0.5f;        // round half away from zero ...
    v = std::min(127.0f, std::max(-127.0f, v));
    q[i] = static_cast<int8_t>(static_cast<int32_t>(v));  // ... by truncation
  }
}

SWARM_VECTOR_CLONES void dequantize(const int8_t* q, uint32_t n, float s, float* out) {
  for (uint32_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * s;
}

SWARM_VECTOR_CLONES int8_t min_code(const int8_t* q, uint32_t n) {
  int8_t m = 0;
  for (uint32_t i = 0; i < n; ++i) m = q[i] < m ? q[i] : m;
  return m;
}

uint32_t first_non_finite(const float* x, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return n;
}

}  // namespace

uint64_t blockwise8_blocks(uint64_t n, uint32_t block) {
  if (block == 0) throw std::invalid_argument("blockwise8: block size 0");
  return n / block + (n % block != 0);
}

uint64_t blockwise8_bytes(uint64_t n, uint32_t block) { return 4 * blockwise8_blocks(n, block) + n; }

void blockwise8_encode(const float* x, uint64_t n, uint32_t block, uint8_t* out, const std::string& what) {
  const uint64_t blocks = blockwise8_blocks(n, block);
  uint8_t* scales = out;
  auto* codes = reinterpret_cast<int8_t*>(out + 4 * blocks);
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t at = b * block;
    const auto len = static_cast<uint32_t>(std::min<uint64_t>(block, n - at));
    const uint32_t bits = abs_bits_max(x + at, len);
    if (bits >= 0x7f800000u) {
      const uint64_t i = at + first_non_finite(x + at, len);
      const float v = x[i];
      throw std::invalid_argument(what + ": value " + std::to_string(i) + " is " +
                                  (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") +
                                  "; blockwise8 sends finite values only");
    }
    float absmax;
    std::memcpy(&absmax, &bits, 4);
    float s = absmax / 127.0f;
    if (!std::isfinite(s * 127.0f)) s = std::nextafter(s, 0.0f);  // absmax near FLT_MAX: 127 s stays finite
    std::memcpy(scales + 4 * b, &s, 4);  // little-endian, as every number on the wire
    const double inv = absmax > 0.0f ? 127.0 / absmax : 0.0;
    if (inv <= static_cast<double>(FLT_MAX)) {
      quantize(x + at, len, static_cast<float>(inv), codes + at);
    } else {  // a block of subnormals: 127 / absmax overflows float
      for (uint32_t i = 0; i < len; ++i)
        codes[at + i] = static_cast<int8_t>(std::lround(std::clamp(x[at + i] * inv, -127.0, 127.0)));
    }
  }
}

void blockwise8_decode(const uint8_t* in, uint64_t n, uint32_t block, float* out, const std::string& what) {
  const uint64_t blocks = blockwise8_blocks(n, block);
  const auto* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for (uint64_t b = 0; b < blocks; ++b) {
    float s;
    std::memcpy(&s, in + 4 * b, 4);
    // 127 s must be finite too, or a code would decode to inf (no encoder writes such a scale).
    if (!(s >= 0.0f) || !std::isfinite(s * 127.0f)) {
      char v[32];
      std::snprintf(v, sizeof v, "%g", static_cast<double>(s));
      throw WireError(what + ".scales[" + std::to_string(b) + "]: " + v +
                      " is not a scale (non-negative, 127 x scale finite)");
    }
    const uint64_t at = b * block;
    const auto len = static_cast<uint32_t>(std::min<uint64_t>(block, n - at));
    if (min_code(codes + at, len) == -128)
      throw WireError(what + ".codes: -128 in block " + std::to_string(b) + " is outside [-127, 127]");
    dequantize(codes + at, len, s, out + at);
  }
}

WireTensor blockwise8_tensor(const float* x, std::vector<int64_t> shape, uint32_t block, const std::string& what) {
  if (block < kBlockwise8MinBlock || block > kBlockwise8MaxBlock)
    throw std::invalid_argument(what + ": blockwise8 block size " + std::to_string(block) + " is outside [" +
                                std::to_string(kBlockwise8MinBlock) + ", " + std::to_string(kBlockwise8MaxBlock) + "]");
  WireTensor t = WireTensor::allocate(DType::Blockwise8, std::move(shape), block);
  blockwise8_encode(x, static_cast<uint64_t>(t.numel()), block, t.data, what);
  return t;
}

}  // namespace swarm::net
