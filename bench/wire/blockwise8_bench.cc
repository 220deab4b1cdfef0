// blockwise8_bench: encode and decode speed of the blockwise8 codec (worker/net/blockwise8.h) on
// one core, in GB/s of float32 input (4 bytes a value), and the bytes and error it gives.
//
//   blockwise8_bench [--values N] [--block B] [--seconds S]
//
// Values are normal(0, 1) floats; each figure is the best of 5 timed passes of S / 10 seconds.
// Prints BLOCKWISE8_ENCODE_GBPS=, BLOCKWISE8_DECODE_GBPS=, BLOCKWISE8_ROUNDTRIP_GBPS= (encode then
// decode, bytes of float32 in / time of both) and BLOCKWISE8_BYTES_RATIO= (encoded / float32).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "worker/net/blockwise8.h"

namespace {

double best_gbps(double bytes, double seconds, const std::function<void()>& fn) {
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    int reps = 0;
    double dt = 0;
    do {
      fn();
      ++reps;
      dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (dt < seconds / 10);
    best = std::max(best, bytes * reps / dt / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 8 * 128 * 192;  // the default job's activations (microbatch x sequence x hidden)
  uint32_t block = swarm::net::kBlockwise8DefaultBlock;
  double seconds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--values") n = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--block") block = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (k == "--seconds") seconds = std::strtod(argv[i + 1], nullptr);
    else {
      std::fprintf(stderr, "usage: blockwise8_bench [--values N] [--block B] [--seconds S]\n");
      return 2;
    }
  }
  std::vector<float> x(n), y(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  for (auto& v : x) v = g(rng);
  std::vector<uint8_t> enc(swarm::net::blockwise8_bytes(n, block));
  const double bytes = 4.0 * static_cast<double>(n);
  const double e = best_gbps(bytes, seconds, [&] { swarm::net::blockwise8_encode(x.data(), n, block, enc.data(), "x"); });
  const double d = best_gbps(bytes, seconds, [&] { swarm::net::blockwise8_decode(enc.data(), n, block, y.data(), "x"); });
  const double rt = best_gbps(bytes, seconds, [&] {
    swarm::net::blockwise8_encode(x.data(), n, block, enc.data(), "x");
    swarm::net::blockwise8_decode(enc.data(), n, block, y.data(), "x");
  });
  double max_err = 0, sq = 0, sq_x = 0;
  for (uint64_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(x[i] - y[i])));
    sq += static_cast<double>(x[i] - y[i]) * (x[i] - y[i]);
    sq_x += static_cast<double>(x[i]) * x[i];
  }
  std::printf("blockwise8_bench: %llu float32 values (normal(0,1)), block %u, one core\n",
              static_cast<unsigned long long>(n), block);
  std::printf("  encode            : %.2f GB/s of float32 in\n", e);
  std::printf("  decode            : %.2f GB/s of float32 out\n", d);
  std::printf("  encode + decode   : %.2f GB/s of float32 (both, one after the other)\n", rt);
  std::printf("  bytes             : %.4f x float32 (%zu of %.0f)\n", enc.size() / bytes, enc.size(), bytes);
  std::printf("  error             : max %.3g, relative rms %.3g\n", max_err, std::sqrt(sq / sq_x));
  std::printf("BLOCKWISE8_ENCODE_GBPS=%.3f\nBLOCKWISE8_DECODE_GBPS=%.3f\nBLOCKWISE8_ROUNDTRIP_GBPS=%.3f\n", e, d, rt);
  std::printf("BLOCKWISE8_BYTES_RATIO=%.4f\n", enc.size() / bytes);
  return 0;
}
