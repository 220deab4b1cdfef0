// Per-connection protection of the data plane: every frame's bytes (header, meta, descriptors and
// tensor bytes) are authenticated with AES-256-GCM, and everything after the header is also
// encrypted when the job asks for it (spec.security.transport). Nothing here is home-made: the
// cipher, HKDF and the random numbers are OpenSSL's.
//
// Handshake, once per TCP connection, before any frame. Each side sends its hello at once, reads
// the other's, derives the keys, sends its confirmation and checks the other's (about 1 round trip
// for the client):
//
//   Hello (40 bytes): u32 magic 'SWRH' | u16 version 2 | u16 protection (1 authenticated,
//                     2 encrypted) | u8 random[32] (fresh from the CSPRNG)
//   Confirmation (32 bytes): HMAC-SHA256(HKDF(secret, salt, "swarm data v2 <protection> confirm"),
//                     "client" | "server" || client hello || server hello)
//
// A peer without the job's secret, or a hello altered on the path, fails the confirmation: the
// connection ends with a clear error before any frame is sent.
//
// Keys: HKDF-SHA256(job secret, salt = client random || server random, info = "swarm data v2
// <protection> c2s" | "... s2c"), 32 bytes per direction. Both randoms are fresh, so no two
// connections share a key and a frame recorded on one connection is refused on every other; the
// protection is in the key's info, so a hello altered on the path yields keys that do not match.
// Nonce: 12 bytes, 4 zero bytes then the direction's frame counter (u64, little-endian), which both
// sides keep: a frame replayed, dropped or reordered within the connection fails its tag.
//
// Frame (version 2):
//   FrameHeader (40 bytes, plaintext, authenticated as the AEAD's associated data)
//   meta | desc_0 | data_0 | ... | desc_{n-1} | data_{n-1}   (ciphertext when encrypted;
//                                                             associated data when authenticated)
//   u8 tag[16]                                               (the GCM tag over all of it)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/crypto.h"

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX, kept out of this header

namespace swarm::net {

enum class Protection : uint16_t {
  Authenticated = 1,  // every byte authenticated (GMAC), tensor bytes in clear
  Encrypted = 2,      // every byte authenticated, everything after the header encrypted
};

// "authenticated" | "encrypted"; parse throws std::invalid_argument naming the value.
const char* protection_name(Protection p);
Protection parse_protection(const std::string& text);

constexpr size_t kTagBytes = 16;
constexpr size_t kHelloBytes = 40;
constexpr size_t kRandomBytes = 32;
constexpr uint32_t kHelloMagic = 0x48525753;  // "SWRH" as little-endian bytes
constexpr uint16_t kHelloVersion = 2;

struct Hello {
  Protection protection = Protection::Authenticated;
  std::array<uint8_t, kRandomBytes> random{};
};

// A fresh hello (random from the CSPRNG).
Hello make_hello(Protection p);
void encode_hello(const Hello& h, uint8_t out[kHelloBytes]);
// Throws WireError naming the field (magic, version, protection) of a bad hello.
Hello parse_hello(const uint8_t in[kHelloBytes]);

// One direction of a connection: seals (sender) or opens (receiver) one frame at a time, in order.
class FrameCipher {
 public:
  // `sealer`: this side sends with it (else it opens what the other side sent).
  FrameCipher(const std::string& key, Protection p, bool sealer);
  ~FrameCipher();
  FrameCipher(const FrameCipher&) = delete;
  FrameCipher& operator=(const FrameCipher&) = delete;

  Protection protection() const { return protection_; }
  bool encrypts() const { return protection_ == Protection::Encrypted; }

  // A frame: begin(header) ... update(bytes) in wire order ... finish. Encrypting: update writes
  // the ciphertext to `out` (may equal `in`); authenticating only: `out` is ignored. Opening:
  // update decrypts in place (or authenticates), finish_open checks the tag (AuthError).
  void begin_seal(const uint8_t header[40]);
  void update(const void* in, void* out, size_t n);
  std::array<uint8_t, kTagBytes> finish_seal();

  void begin_open(const uint8_t header[40]);
  void finish_open(const uint8_t tag[kTagBytes]);

  uint64_t frames() const { return counter_; }

 private:
  void begin(const uint8_t header[40]);

  evp_cipher_ctx_st* ctx_ = nullptr;
  Protection protection_;
  bool sealer_;
  uint64_t counter_ = 0;
};

// Both directions of one connection.
struct Session {
  std::unique_ptr<FrameCipher> tx;  // frames this side sends
  std::unique_ptr<FrameCipher> rx;  // frames this side receives
  crypto::Mac my_confirmation{};    // what this side sends after the hellos
  crypto::Mac their_confirmation{};  // what it must receive
};

// The session of a connection after the hellos were exchanged. `mine` and `theirs` must agree on
// the protection (else std::invalid_argument naming both). Throws std::invalid_argument for an
// empty secret.
Session make_session(const std::string& secret, bool is_client, const Hello& mine, const Hello& theirs);

// A matched pair (client, server) with fresh hellos: for tests and tools that encode and decode
// frames without a socket.
std::pair<Session, Session> session_pair(const std::string& secret, Protection p);

}  // namespace swarm::net
