// Registry request authentication: every request to a job's registry, except the read-only
// GET /healthz, /metrics and /v1/stats, carries proof that its sender holds the job secret, and a
// proof is good for one request only.
//
//   Authorization: SwarmHMAC ts=<unix ms>,nonce=<32 lowercase hex>,sig=<64 lowercase hex>
//
//   sig = HMAC-SHA256(K, "SWARM-REG-V1\n" + METHOD + "\n" + target + "\n" + ts + "\n" + nonce + "\n"
//                        + hex(SHA-256(body)))
//   K   = HKDF-SHA256(job secret, salt "", info "swarm registry v1")
//
// `target` is the request's path and query exactly as sent ("/v1/peers?role=worker"); ts and nonce
// are the header's text. The registry accepts ts within kWindowMs of its own clock and remembers
// every accepted nonce until its ts leaves that window, so a captured request cannot be sent again:
// within the window its nonce is known, after it its time stamp is too old. The nonce memory is
// bounded (Verifier's capacity): when it is full of nonces still inside the window the registry
// refuses new requests with 503 (CacheFull) rather than forget a nonce early.
//
// Peers' clocks may be minutes off: every registry reply carries X-Swarm-Time (the registry's Unix
// ms), and RegistryClient signs with its estimate of the registry's clock.
//
// Primitives are common/crypto.h's (OpenSSL).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "common/thread_annotations.h"

namespace swarm::registry::auth {

inline constexpr const char* kScheme = "SwarmHMAC";
inline constexpr const char* kTimeHeader = "X-Swarm-Time";
inline constexpr int64_t kWindowMs = 60'000;
// 524,288 nonces (about 55 MB at most, some 104 bytes each). A nonce is kept until its time stamp
// is kWindowMs old: about 60 s when clocks agree, so 8,738 signed requests/s sustained (4,369 at
// worst, every time stamp a full window ahead). One registry core serves about 3,000 requests/s
// (docs/benchmarks.md): the memory fills only under more than it could serve anyway.
inline constexpr size_t kDefaultNonceCapacity = size_t{1} << 19;

// K above. Throws std::invalid_argument for an empty secret.
std::string registry_key(std::string_view secret);

// The text that is signed (see above); `ts` and `nonce` as they appear in the header.
std::string string_to_sign(std::string_view method, std::string_view target, std::string_view ts,
                           std::string_view nonce, std::string_view body);

// The Authorization header's value for one request, signed with `key` (registry_key()).
std::string authorization(std::string_view key, std::string_view method, std::string_view target,
                          std::string_view body, int64_t ts_ms, std::string_view nonce);

// A fresh nonce: 16 bytes of OpenSSL's CSPRNG as 32 lowercase hex characters.
std::string new_nonce();

enum class Failure { None, Missing, Malformed, BadSignature, Timestamp, Replayed, CacheFull };

// The label of a failure in swarm_registry_auth_failures_total{reason} and in a refusal's
// "reason": missing, malformed, bad_signature, timestamp, replayed, cache_full ("" for None).
const char* reason_label(Failure f);
// Every failure but None, for metrics that show each reason from the start.
inline constexpr Failure kFailures[] = {Failure::Missing,   Failure::Timestamp, Failure::BadSignature,
                                        Failure::Malformed, Failure::Replayed,  Failure::CacheFull};

struct Verdict {
  Failure failure = Failure::None;
  std::string message;  // "<field>: <problem>, got <value>" when refused
  bool ok() const { return failure == Failure::None; }
};

// The fields of an Authorization header.
struct Credentials {
  std::string ts;     // decimal Unix ms, as sent
  int64_t ts_ms = 0;  // its value
  std::string nonce;  // 32 lowercase hex
  std::string sig;    // 64 lowercase hex
};

// Parses a header value; on failure returns Missing (empty) or Malformed with the field named.
Verdict parse(std::string_view header, Credentials& out);

// The registry's side: checks requests and remembers their nonces. Thread-safe.
class Verifier {
 public:
  // Throws std::invalid_argument for an empty secret or a capacity of 0.
  Verifier(std::string_view secret, size_t nonce_capacity = kDefaultNonceCapacity);

  // Checks, in this order: the header's form, the signature, the time stamp (within kWindowMs of
  // now_ms), the nonce (not seen while in the window; remembered when everything else holds).
  Verdict verify(std::string_view method, std::string_view target, std::string_view body,
                 std::string_view header, int64_t now_ms) EXCLUDES(mu_);

  size_t remembered() const EXCLUDES(mu_);

 private:
  // A nonce's 16 bytes, as two words.
  using Nonce = std::pair<uint64_t, uint64_t>;
  struct NonceHash {
    size_t operator()(const Nonce& n) const { return static_cast<size_t>(n.first ^ (n.second * 0x9e3779b97f4a7c15ULL)); }
  };
  static Nonce nonce_of(const std::string& hex);
  // Accepts `nonce` (time stamp ts_ms) unless seen; forgets nonces out of the window first.
  Failure remember(const Nonce& nonce, int64_t ts_ms, int64_t now_ms) EXCLUDES(mu_);

  const std::string key_;
  const size_t capacity_;
  mutable swarm::Mutex mu_;
  std::unordered_set<Nonce, NonceHash> seen_ GUARDED_BY(mu_);
  std::set<std::pair<int64_t, Nonce>> by_ts_ GUARDED_BY(mu_);  // (ts, nonce) of every nonce in seen_
};

}  // namespace swarm::registry::auth
