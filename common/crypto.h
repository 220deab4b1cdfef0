// The project's cryptographic primitives, all from OpenSSL (never home-made): HMAC-SHA256 with a
// constant-time compare, SHA-256, HKDF-SHA256 (RFC 5869) to derive one key per purpose from the
// job secret, and random bytes. The data plane (worker/net), the registry's request signatures
// (registry/) and checkpoint authentication share them. No sockets, no libtorch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct evp_mac_ctx_st;  // OpenSSL's EVP_MAC_CTX, kept out of this header

namespace swarm::crypto {

constexpr size_t kMacBytes = 32;
using Mac = std::array<uint8_t, kMacBytes>;

// Incremental HMAC-SHA256. Not copyable; one per message being written or read.
class Hmac {
 public:
  // Throws std::invalid_argument for an empty key, std::runtime_error if OpenSSL fails.
  explicit Hmac(std::string_view key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;

  void update(const void* data, size_t n);
  Mac finish();  // once

 private:
  evp_mac_ctx_st* ctx_ = nullptr;
};

Mac hmac_sha256(std::string_view key, const void* data, size_t n);

// Constant-time equality of two n-byte buffers (CRYPTO_memcmp).
bool mac_equal(const uint8_t* a, const uint8_t* b, size_t n);

// SHA-256 of data[0, n).
std::array<uint8_t, 32> sha256(const void* data, size_t n);

// HKDF-SHA256: `n` bytes of key material from `key` (the job secret), a `salt` (may be empty) and
// an `info` naming the purpose ("swarm registry v1", ...), so that no two uses share a key.
// Throws std::invalid_argument for an empty key or n outside 1..8160, std::runtime_error if
// OpenSSL fails.
std::string hkdf_sha256(std::string_view key, std::string_view salt, std::string_view info, size_t n = 32);

// `n` bytes from OpenSSL's CSPRNG; throws std::runtime_error when it fails.
std::string random_bytes(size_t n);

// Lower-case hex of n bytes.
std::string to_hex(const void* data, size_t n);

// Lower-case hex of the SHA-256 of `bytes` (S3's x-amz-content-sha256, checkpoint manifests).
std::string sha256_hex(std::string_view bytes);

}  // namespace swarm::crypto
