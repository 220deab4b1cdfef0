// Frame authentication: HMAC-SHA256 keyed by the job secret (OpenSSL), constant-time compare.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

struct evp_mac_ctx_st;  // OpenSSL's EVP_MAC_CTX, kept out of this header

namespace swarm::net {

constexpr size_t kMacBytes = 32;
using Mac = std::array<uint8_t, kMacBytes>;

// Incremental HMAC-SHA256. Not copyable; one per frame being written or read.
class Hmac {
 public:
  // Throws std::invalid_argument for an empty key, std::runtime_error if OpenSSL fails.
  explicit Hmac(const std::string& key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;

  void update(const void* data, size_t n);
  Mac finish();  // once

 private:
  evp_mac_ctx_st* ctx_ = nullptr;
};

Mac hmac_sha256(const std::string& key, const void* data, size_t n);

// Constant-time equality of two n-byte buffers (CRYPTO_memcmp).
bool mac_equal(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace swarm::net
