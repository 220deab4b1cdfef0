#include "worker/net/session.h"

#include <openssl/evp.h>

#include <cstring>
#include <stdexcept>

#include "common/crypto.h"
#include "worker/net/errors.h"

namespace swarm::net {
namespace {

constexpr size_t kNonceBytes = 12;
constexpr size_t kMaxUpdate = size_t{1} << 30;  // EVP lengths are int

[[noreturn]] void openssl_failed(const char* what) { throw std::runtime_error(std::string("OpenSSL: ") + what + " failed"); }

std::string key_info(Protection p, const char* direction) {
  return std::string("swarm data v2 ") + protection_name(p) + " " + direction;
}

}  // namespace

const char* protection_name(Protection p) {
  return p == Protection::Encrypted ? "encrypted" : "authenticated";
}

Protection parse_protection(const std::string& text) {
  if (text == "authenticated") return Protection::Authenticated;
  if (text == "encrypted") return Protection::Encrypted;
  throw std::invalid_argument("transport: must be authenticated or encrypted, got \"" + text + "\"");
}

Hello make_hello(Protection p) {
  Hello h;
  h.protection = p;
  const std::string r = crypto::random_bytes(kRandomBytes);
  std::memcpy(h.random.data(), r.data(), kRandomBytes);
  return h;
}

void encode_hello(const Hello& h, uint8_t out[kHelloBytes]) {
  const uint32_t magic = kHelloMagic;
  const uint16_t version = kHelloVersion, prot = static_cast<uint16_t>(h.protection);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(magic >> (8 * i));
  for (int i = 0; i < 2; ++i) out[4 + i] = static_cast<uint8_t>(version >> (8 * i));
  for (int i = 0; i < 2; ++i) out[6 + i] = static_cast<uint8_t>(prot >> (8 * i));
  std::memcpy(out + 8, h.random.data(), kRandomBytes);
}

Hello parse_hello(const uint8_t in[kHelloBytes]) {
  const uint32_t magic = in[0] | in[1] << 8 | in[2] << 16 | static_cast<uint32_t>(in[3]) << 24;
  const uint16_t version = static_cast<uint16_t>(in[4] | in[5] << 8);
  const uint16_t prot = static_cast<uint16_t>(in[6] | in[7] << 8);
  if (magic != kHelloMagic) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08X", magic);
    throw WireError(std::string("hello.magic: ") + buf + " is not SWRH (not a swarm data-plane peer, or an older version)");
  }
  if (version != kHelloVersion)
    throw WireError("hello.version: " + std::to_string(version) + " is not supported (expected " +
                    std::to_string(kHelloVersion) + ")");
  if (prot != static_cast<uint16_t>(Protection::Authenticated) && prot != static_cast<uint16_t>(Protection::Encrypted))
    throw WireError("hello.protection: " + std::to_string(prot) + " is not 1 (authenticated) or 2 (encrypted)");
  Hello h;
  h.protection = static_cast<Protection>(prot);
  std::memcpy(h.random.data(), in + 8, kRandomBytes);
  return h;
}

FrameCipher::FrameCipher(const std::string& key, Protection p, bool sealer) : protection_(p), sealer_(sealer) {
  if (key.size() != 32) throw std::invalid_argument("FrameCipher: key must be 32 bytes");
  ctx_ = EVP_CIPHER_CTX_new();
  if (ctx_ == nullptr) openssl_failed("EVP_CIPHER_CTX_new");
  const int enc = sealer ? 1 : 0;
  if (EVP_CipherInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, nullptr, nullptr, enc) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kNonceBytes), nullptr) != 1 ||
      EVP_CipherInit_ex(ctx_, nullptr, nullptr, reinterpret_cast<const unsigned char*>(key.data()), nullptr, enc) != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    openssl_failed("AES-256-GCM init");
  }
}

FrameCipher::~FrameCipher() { EVP_CIPHER_CTX_free(ctx_); }

void FrameCipher::begin(const uint8_t header[40]) {
  unsigned char nonce[kNonceBytes] = {0};
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<unsigned char>(counter_ >> (8 * i));
  ++counter_;  // never reused: a failed frame ends the connection
  if (EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, nonce, sealer_ ? 1 : 0) != 1) openssl_failed("GCM nonce");
  int len = 0;
  if (EVP_CipherUpdate(ctx_, nullptr, &len, header, 40) != 1) openssl_failed("GCM header");
}

void FrameCipher::begin_seal(const uint8_t header[40]) {
  if (!sealer_) throw std::logic_error("FrameCipher: begin_seal on the receiving side");
  begin(header);
}

void FrameCipher::begin_open(const uint8_t header[40]) {
  if (sealer_) throw std::logic_error("FrameCipher: begin_open on the sending side");
  begin(header);
}

void FrameCipher::update(const void* in, void* out, size_t n) {
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  while (n > 0) {
    const size_t k = std::min(n, kMaxUpdate);
    int len = 0;
    // Authenticated only: the bytes are associated data (out = nullptr), they go out as they are.
    if (EVP_CipherUpdate(ctx_, encrypts() ? dst : nullptr, &len, src, static_cast<int>(k)) != 1)
      openssl_failed("GCM update");
    src += k;
    if (encrypts()) dst += k;
    n -= k;
  }
}

std::array<uint8_t, kTagBytes> FrameCipher::finish_seal() {
  int len = 0;
  unsigned char scratch[16];
  if (EVP_CipherFinal_ex(ctx_, scratch, &len) != 1) openssl_failed("GCM final");
  std::array<uint8_t, kTagBytes> tag{};
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag.data()) != 1)
    openssl_failed("GCM tag");
  return tag;
}

void FrameCipher::finish_open(const uint8_t tag[kTagBytes]) {
  unsigned char copy[kTagBytes];
  std::memcpy(copy, tag, kTagBytes);
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), copy) != 1)
    openssl_failed("GCM set tag");
  int len = 0;
  unsigned char scratch[16];
  if (EVP_CipherFinal_ex(ctx_, scratch, &len) != 1)
    throw AuthError("frame.tag: authentication failed (a byte of the frame was changed, replayed or reordered, or "
                    "the job secret differs)");
}

Session make_session(const std::string& secret, bool is_client, const Hello& mine, const Hello& theirs) {
  if (secret.empty()) throw std::invalid_argument("the job secret must not be empty");
  if (mine.protection != theirs.protection)
    throw std::invalid_argument(std::string("the peer protects frames as ") + protection_name(theirs.protection) +
                                ", this side as " + protection_name(mine.protection) +
                                " (spec.security.transport must be the same for every process of a job)");
  const Hello& client = is_client ? mine : theirs;
  const Hello& server = is_client ? theirs : mine;
  std::string salt(reinterpret_cast<const char*>(client.random.data()), kRandomBytes);
  salt.append(reinterpret_cast<const char*>(server.random.data()), kRandomBytes);
  const std::string c2s = crypto::hkdf_sha256(secret, salt, key_info(mine.protection, "c2s"));
  const std::string s2c = crypto::hkdf_sha256(secret, salt, key_info(mine.protection, "s2c"));
  Session s;
  s.tx = std::make_unique<FrameCipher>(is_client ? c2s : s2c, mine.protection, true);
  s.rx = std::make_unique<FrameCipher>(is_client ? s2c : c2s, mine.protection, false);
  const std::string confirm_key = crypto::hkdf_sha256(secret, salt, key_info(mine.protection, "confirm"));
  uint8_t transcript[6 + 2 * kHelloBytes];
  encode_hello(client, transcript + 6);
  encode_hello(server, transcript + 6 + kHelloBytes);
  auto confirmation = [&](const char* who) {
    std::memcpy(transcript, who, 6);
    return crypto::hmac_sha256(confirm_key, transcript, sizeof transcript);
  };
  s.my_confirmation = confirmation(is_client ? "client" : "server");
  s.their_confirmation = confirmation(is_client ? "server" : "client");
  return s;
}

std::pair<Session, Session> session_pair(const std::string& secret, Protection p) {
  const Hello c = make_hello(p), s = make_hello(p);
  return {make_session(secret, true, c, s), make_session(secret, false, s, c)};
}

}  // namespace swarm::net
