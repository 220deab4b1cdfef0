// blockwise8 (worker/net/blockwise8.h): the error bound of every value against its block's absmax,
// sizes, inf/NaN refused on encode, bad scales refused on decode, and the frame decoder's checks of
// a blockwise8 descriptor (block size, nbytes against shape and block) before it reads any data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/net/raw_frame.h"
#include "worker/net/blockwise8.h"
#include "worker/net/frame.h"

namespace net = swarm::net;
using net::DType;
using net::testing::decode;
using net::testing::expect_reject;
using net::testing::Raw;

namespace {

std::vector<float> roundtrip(const std::vector<float>& x, uint32_t block) {
  std::vector<uint8_t> enc(net::blockwise8_bytes(x.size(), block));
  net::blockwise8_encode(x.data(), x.size(), block, enc.data(), "x");
  std::vector<float> out(x.size());
  net::blockwise8_decode(enc.data(), x.size(), block, out.data(), "x");
  return out;
}

// Every value within half a step of its block's scale (absmax / 127), plus float rounding.
void expect_within_bound(const std::vector<float>& x, const std::vector<float>& y, uint32_t block) {
  for (size_t b = 0; b * block < x.size(); ++b) {
    const size_t lo = b * block, hi = std::min(x.size(), lo + block);
    float absmax = 0;
    for (size_t i = lo; i < hi; ++i) absmax = std::max(absmax, std::fabs(x[i]));
    const float bound = absmax / 254.0f * (1 + 1e-4f) + std::numeric_limits<float>::denorm_min();
    for (size_t i = lo; i < hi; ++i) ASSERT_LE(std::fabs(x[i] - y[i]), bound) << "value " << i << " of block " << b;
  }
}

}  // namespace

TEST(Blockwise8, EveryValueIsWithinHalfAStepOfItsBlocksScale) {
  std::mt19937 rng(7);
  for (uint32_t block : {16u, 64u, 1000u, 4096u, 65535u}) {
    for (size_t n : {size_t{1}, size_t{15}, size_t{4096}, size_t{10007}, size_t{70000}}) {
      std::vector<float> x(n);
      // Blocks of very different magnitudes: a block's scale must not depend on its neighbours.
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (size_t i = 0; i < n; ++i) x[i] = g(rng) * std::pow(10.0f, static_cast<float>((i / block) % 7) - 3);
      SCOPED_TRACE("block " + std::to_string(block) + ", n " + std::to_string(n));
      expect_within_bound(x, roundtrip(x, block), block);
    }
  }
}

TEST(Blockwise8, ExtremesAreExactAndZerosStayZero) {
  // The absmax value of a block is coded as +-127 and decodes to itself (up to rounding); zeros,
  // a block of zeros and subnormals decode without NaN.
  std::vector<float> x = {0.0f, -3.5f, 3.5f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f,
                          1e-40f, -2e-40f, 0.0f, 5e-39f, 0.0f, 0.0f, 0.0f, 0.0f};
  x.resize(48, 0.0f);  // a third block of zeros
  const auto y = roundtrip(x, 16);
  EXPECT_NEAR(y[1], -3.5f, 1e-6f);
  EXPECT_NEAR(y[2], 3.5f, 1e-6f);
  EXPECT_EQ(y[0], 0.0f);
  for (size_t i = 32; i < 48; ++i) EXPECT_EQ(y[i], 0.0f);
  for (size_t i = 16; i < 32; ++i) {
    EXPECT_TRUE(std::isfinite(y[i])) << i;
    EXPECT_LE(std::fabs(x[i] - y[i]), 1e-40f) << i;
  }
}

TEST(Blockwise8, SizeIsAQuarterOfFloat32PlusAScalePerBlock) {
  EXPECT_EQ(net::blockwise8_blocks(0, 4096), 0u);
  EXPECT_EQ(net::blockwise8_blocks(4096, 4096), 1u);
  EXPECT_EQ(net::blockwise8_blocks(4097, 4096), 2u);
  EXPECT_EQ(net::blockwise8_bytes(4097, 4096), 4097u + 8u);
  const uint64_t n = 8 * 128 * 192;  // the default job's activations: microbatch x sequence x hidden
  EXPECT_LE(static_cast<double>(net::blockwise8_bytes(n, 4096)) / (4.0 * n), 0.2503);
  auto t = net::blockwise8_tensor(std::vector<float>(n, 1.0f).data(), {8, 128, 192}, 4096, "act");
  EXPECT_EQ(t.dtype, DType::Blockwise8);
  EXPECT_EQ(t.block, 4096u);
  EXPECT_EQ(t.nbytes, net::blockwise8_bytes(n, 4096));
  EXPECT_THROW(net::blockwise8_tensor(nullptr, {0}, 8, "act"), std::invalid_argument);  // block < 16
}

TEST(Blockwise8, InfAndNanAreRefusedWithTheirIndex) {
  std::vector<float> x(100, 1.0f);
  std::vector<uint8_t> enc(net::blockwise8_bytes(x.size(), 16));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    x[37] = bad;
    try {
      net::blockwise8_encode(x.data(), x.size(), 16, enc.data(), "forward output");
      ADD_FAILURE() << "encoded " << bad;
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("forward output: value 37 is "), std::string::npos) << what;
      EXPECT_NE(what.find(std::isnan(bad) ? "nan" : bad > 0 ? "inf" : "-inf"), std::string::npos) << what;
    }
  }
}

TEST(Blockwise8, ABadScaleIsRefusedNamingItsBlock) {
  std::vector<float> x(40, 0.5f), y(40);
  std::vector<uint8_t> enc(net::blockwise8_bytes(x.size(), 16));
  net::blockwise8_encode(x.data(), x.size(), 16, enc.data(), "g");
  // 1e37: finite, but 127 x 1e37 is not (a fuzzer found that one decoding to inf).
  for (float bad : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1e37f}) {
    auto e = enc;
    std::memcpy(e.data() + 4 * 2, &bad, 4);  // the third block's scale
    try {
      net::blockwise8_decode(e.data(), x.size(), 16, y.data(), "tensor[0]");
      ADD_FAILURE() << "decoded scale " << bad;
    } catch (const net::WireError& err) {
      EXPECT_NE(std::string(err.what()).find("tensor[0].scales[2]: "), std::string::npos) << err.what();
    }
  }
  auto e = enc;
  e[4 * 3 + 20] = 0x80;  // a code of -128 in the second block: no encoder writes it
  EXPECT_THROW(net::blockwise8_decode(e.data(), x.size(), 16, y.data(), "t"), net::WireError);
  // The largest finite values encode and decode to finite values.
  std::vector<float> big = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 1.0f};
  std::vector<uint8_t> be(net::blockwise8_bytes(big.size(), 16));
  std::vector<float> by(big.size());
  net::blockwise8_encode(big.data(), big.size(), 16, be.data(), "big");
  net::blockwise8_decode(be.data(), big.size(), 16, by.data(), "big");
  for (float v : by) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_NEAR(by[0] / std::numeric_limits<float>::max(), 1.0, 1e-6);
}

TEST(Blockwise8, FramesCarryTheBlockSizeAndRoundTrip) {
  std::vector<float> x(3 * 5 * 7);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  net::Message m;
  m.type = net::ForwardReply;
  m.tensors.push_back(net::blockwise8_tensor(x.data(), {3, 5, 7}, 16, "out"));
  auto s = net::testing::client_session();
  const auto got = decode(net::encode_frame(m, *s.tx));
  ASSERT_EQ(got.tensors.size(), 1u);
  const auto& t = got.tensors[0];
  EXPECT_EQ(t.dtype, DType::Blockwise8);
  EXPECT_EQ(t.block, 16u);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 5, 7}));
  ASSERT_EQ(t.nbytes, m.tensors[0].nbytes);
  EXPECT_EQ(std::memcmp(t.data, m.tensors[0].data, t.nbytes), 0);
}

// The decoder checks a blockwise8 descriptor before it reads a byte of the tensor: the block size
// must be set (and only for blockwise8), nbytes must be the codes plus a scale per block.
TEST(Blockwise8, TheFrameDecoderRefusesBlockAndSizeMismatches) {
  Raw r;
  r.add(DType::Blockwise8, {10, 10}, 16);  // 100 codes + 7 scales
  ASSERT_EQ(r.descs[0].nbytes, 100u + 4 * 7);
  EXPECT_EQ(decode(r.build()).tensors.at(0).block, 16u);

  r.descs[0].block = 0;
  expect_reject(r.build(), "tensor[0].block: 0 is not a block size in [1, 65535]");
  r.descs[0].block = 32;  // 4 scales, not 7: the bytes no longer match the shape
  expect_reject(r.build(), "tensor[0].nbytes: 128 does not match shape [10,10] of blockwise8 in blocks of 32 (116 bytes)");
  r.descs[0].block = 16;
  r.descs[0].nbytes = 100;  // the codes without their scales
  r.descs[0].data.resize(100);
  expect_reject(r.build(), "tensor[0].nbytes: 100 does not match shape [10,10] of blockwise8 in blocks of 16 (128 bytes)");

  r = Raw();
  r.add(DType::Float32, {4});
  r.descs[0].block = 16;  // a block size on a dtype that has none
  expect_reject(r.build(), "tensor[0].block: 16 must be 0 for float32");

  r = Raw();  // a huge element count whose scales overflow: refused, never allocated
  r.add(DType::Blockwise8, {1}, 1);
  r.descs[0].dims = {int64_t{1} << 62, 4};
  r.descs[0].ndim = 2;
  expect_reject(r.build(), "tensor[0].shape");
}
