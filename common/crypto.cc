#include "common/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <memory>
#include <stdexcept>

namespace swarm::crypto {

namespace {

// Fetched once: fetching is a locked provider lookup, too slow to repeat per frame.
EVP_MAC* hmac_algorithm() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) throw std::runtime_error("OpenSSL: HMAC is not available");
  return mac;
}

EVP_KDF* hkdf_algorithm() {
  static EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) throw std::runtime_error("OpenSSL: HKDF is not available");
  return kdf;
}

}  // namespace

Hmac::Hmac(std::string_view key) {
  if (key.empty()) throw std::invalid_argument("HMAC key (job secret) must not be empty");
  ctx_ = EVP_MAC_CTX_new(hmac_algorithm());
  if (ctx_ == nullptr) throw std::runtime_error("OpenSSL: EVP_MAC_CTX_new failed");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_MAC_init(ctx_, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx_);
    throw std::runtime_error("OpenSSL: HMAC-SHA256 init failed");
  }
}

Hmac::~Hmac() { EVP_MAC_CTX_free(ctx_); }

void Hmac::update(const void* data, size_t n) {
  if (n == 0) return;
  if (EVP_MAC_update(ctx_, static_cast<const unsigned char*>(data), n) != 1)
    throw std::runtime_error("OpenSSL: HMAC update failed");
}

Mac Hmac::finish() {
  Mac out{};
  size_t len = 0;
  if (EVP_MAC_final(ctx_, out.data(), &len, out.size()) != 1 || len != out.size())
    throw std::runtime_error("OpenSSL: HMAC final failed");
  return out;
}

Mac hmac_sha256(std::string_view key, const void* data, size_t n) {
  Hmac h(key);
  h.update(data, n);
  return h.finish();
}

bool mac_equal(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

std::array<uint8_t, 32> sha256(const void* data, size_t n) {
  std::array<uint8_t, 32> out{};
  if (EVP_Digest(data, n, out.data(), nullptr, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  return out;
}

std::string hkdf_sha256(std::string_view key, std::string_view salt, std::string_view info, size_t n) {
  if (key.empty()) throw std::invalid_argument("HKDF key (job secret) must not be empty");
  if (n == 0 || n > 255 * 32) throw std::invalid_argument("HKDF output length must be 1..8160, got " + std::to_string(n));
  std::unique_ptr<EVP_KDF_CTX, decltype(&EVP_KDF_CTX_free)> ctx(EVP_KDF_CTX_new(hkdf_algorithm()), EVP_KDF_CTX_free);
  if (!ctx) throw std::runtime_error("OpenSSL: EVP_KDF_CTX_new failed");
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  size_t i = 0;
  params[i++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(key.data()), key.size());
  if (!salt.empty())
    params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()), salt.size());
  params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size());
  params[i] = OSSL_PARAM_construct_end();
  std::string out(n, '\0');
  if (EVP_KDF_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), n, params) != 1)
    throw std::runtime_error("OpenSSL: HKDF-SHA256 failed");
  return out;
}

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("OpenSSL: RAND_bytes failed");
  return out;
}

std::string to_hex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  const auto d = sha256(bytes.data(), bytes.size());
  return to_hex(d.data(), d.size());
}

}  // namespace swarm::crypto
