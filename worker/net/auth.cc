#include "worker/net/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <stdexcept>

namespace swarm::net {

namespace {

// Fetched once: fetching is a locked provider lookup, too slow to repeat per frame.
EVP_MAC* hmac_algorithm() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) throw std::runtime_error("OpenSSL: HMAC is not available");
  return mac;
}

}  // namespace

Hmac::Hmac(const std::string& key) {
  if (key.empty()) throw std::invalid_argument("HMAC key (job secret) must not be empty");
  ctx_ = EVP_MAC_CTX_new(hmac_algorithm());
  if (ctx_ == nullptr) throw std::runtime_error("OpenSSL: EVP_MAC_CTX_new failed");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_MAC_init(ctx_, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                   params) != 1) {
    EVP_MAC_CTX_free(ctx_);
    throw std::runtime_error("OpenSSL: HMAC-SHA256 init failed");
  }
}

Hmac::~Hmac() { EVP_MAC_CTX_free(ctx_); }

void Hmac::update(const void* data, size_t n) {
  if (n == 0) return;
  if (EVP_MAC_update(ctx_, static_cast<const unsigned char*>(data), n) != 1) {
    throw std::runtime_error("OpenSSL: HMAC update failed");
  }
}

Mac Hmac::finish() {
  Mac out{};
  size_t len = 0;
  if (EVP_MAC_final(ctx_, out.data(), &len, out.size()) != 1 || len != out.size()) {
    throw std::runtime_error("OpenSSL: HMAC final failed");
  }
  return out;
}

Mac hmac_sha256(const std::string& key, const void* data, size_t n) {
  Hmac h(key);
  h.update(data, n);
  return h.finish();
}

bool mac_equal(const uint8_t* a, const uint8_t* b, size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

}  // namespace swarm::net
