#include "registry/request_auth.h"

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "common/crypto.h"

namespace swarm::registry::auth {
namespace {

constexpr std::string_view kDomain = "SWARM-REG-V1\n";
constexpr size_t kNonceHex = 32;
constexpr size_t kSigHex = 64;
constexpr size_t kMaxTsDigits = 15;  // Unix ms until the year 33658

// A value quoted for an error message: at most 80 characters, printable ASCII only.
std::string quoted(std::string_view v) {
  std::string out = "\"";
  for (size_t i = 0; i < v.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    out += c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? static_cast<char>(c) : '?';
  }
  return out + (v.size() > 80 ? "...\"" : "\"");
}

bool lower_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool digits(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Verdict malformed(const std::string& field, const std::string& problem, std::string_view value) {
  return {Failure::Malformed, "authorization" + field + ": " + problem + ", got " + quoted(value)};
}

// Stores one "name=value" field of the header into `out`; a refusal when it is not one we know,
// is given twice, or is not well formed.
Verdict take_field(std::string_view item, Credentials& out, std::vector<std::string>& seen) {
  const size_t eq = item.find('=');
  if (eq == std::string_view::npos) return malformed("", "fields must be name=value (ts, nonce, sig)", item);
  const std::string name(trim(item.substr(0, eq)));
  const std::string_view value = trim(item.substr(eq + 1));
  if (name != "ts" && name != "nonce" && name != "sig")
    return malformed("", "unknown field " + quoted(name) + " (expected ts, nonce, sig)", item);
  for (const std::string& s : seen)
    if (s == name) return malformed("." + name, "given twice", value);
  seen.push_back(name);
  if (name == "ts") {
    if (!digits(value, kMaxTsDigits)) return malformed(".ts", "must be Unix milliseconds (1-15 digits)", value);
    out.ts = std::string(value);
    out.ts_ms = std::strtoll(out.ts.c_str(), nullptr, 10);
  } else if (name == "nonce") {
    if (!lower_hex(value, kNonceHex)) return malformed(".nonce", "must be 32 lowercase hex characters", value);
    out.nonce = std::string(value);
  } else {
    if (!lower_hex(value, kSigHex)) return malformed(".sig", "must be 64 lowercase hex characters", value);
    out.sig = std::string(value);
  }
  return {};
}

}  // namespace

std::string registry_key(std::string_view secret) {
  if (secret.empty()) throw std::invalid_argument("registry key: the job secret is empty");
  return crypto::hkdf_sha256(secret, "", "swarm registry v1");
}

std::string string_to_sign(std::string_view method, std::string_view target, std::string_view ts,
                           std::string_view nonce, std::string_view body) {
  const auto digest = crypto::sha256(body.data(), body.size());
  std::string s;
  s.reserve(kDomain.size() + method.size() + target.size() + ts.size() + nonce.size() + 70);
  s.append(kDomain).append(method).append("\n").append(target).append("\n").append(ts).append("\n");
  s.append(nonce).append("\n").append(crypto::to_hex(digest.data(), digest.size()));
  return s;
}

std::string authorization(std::string_view key, std::string_view method, std::string_view target,
                          std::string_view body, int64_t ts_ms, std::string_view nonce) {
  const std::string ts = std::to_string(ts_ms);
  const std::string text = string_to_sign(method, target, ts, nonce, body);
  const crypto::Mac mac = crypto::hmac_sha256(key, text.data(), text.size());
  return std::string(kScheme) + " ts=" + ts + ",nonce=" + std::string(nonce) +
         ",sig=" + crypto::to_hex(mac.data(), mac.size());
}

std::string new_nonce() {
  const std::string bytes = crypto::random_bytes(kNonceHex / 2);
  return crypto::to_hex(bytes.data(), bytes.size());
}

const char* reason_label(Failure f) {
  switch (f) {
    case Failure::None: return "";
    case Failure::Missing: return "missing";
    case Failure::Malformed: return "malformed";
    case Failure::BadSignature: return "bad_signature";
    case Failure::Timestamp: return "timestamp";
    case Failure::Replayed: return "replayed";
    case Failure::CacheFull: return "cache_full";
  }
  return "unknown";
}

Verdict parse(std::string_view header, Credentials& out) {
  header = trim(header);
  if (header.empty())
    return {Failure::Missing, "authorization: missing; this registry takes only requests signed with the job secret "
                              "(Authorization: SwarmHMAC ts=...,nonce=...,sig=...), got nothing"};
  const std::string_view scheme(kScheme);
  if (header.substr(0, scheme.size()) != scheme || header.size() == scheme.size() || header[scheme.size()] != ' ')
    return malformed("", "must start with \"SwarmHMAC \"", header);
  std::string_view rest = header.substr(scheme.size() + 1);
  std::vector<std::string> seen;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (Verdict v = take_field(trim(item), out, seen); !v.ok()) return v;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  for (const char* need : {"ts", "nonce", "sig"}) {
    bool have = false;
    for (const std::string& s : seen) have = have || s == need;
    if (!have) return malformed(std::string(".") + need, "missing", header);
  }
  return {};
}

Verifier::Verifier(std::string_view secret, size_t nonce_capacity)
    : key_(registry_key(secret)), capacity_(nonce_capacity) {
  if (capacity_ == 0) throw std::invalid_argument("registry auth: nonce capacity must be >= 1, got 0");
}

Verifier::Nonce Verifier::nonce_of(const std::string& hex) {
  return {std::strtoull(hex.substr(0, 16).c_str(), nullptr, 16), std::strtoull(hex.substr(16, 16).c_str(), nullptr, 16)};
}

Verdict Verifier::verify(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view header, int64_t now_ms) {
  Credentials c;
  if (Verdict v = parse(header, c); !v.ok()) return v;
  const std::string text = string_to_sign(method, target, c.ts, c.nonce, body);
  const crypto::Mac mac = crypto::hmac_sha256(key_, text.data(), text.size());
  const std::string expected = crypto::to_hex(mac.data(), mac.size());
  if (!crypto::mac_equal(reinterpret_cast<const uint8_t*>(expected.data()),
                         reinterpret_cast<const uint8_t*>(c.sig.data()), kSigHex))
    return {Failure::BadSignature,
            "authorization.sig: does not match the request (another secret, or the method, path, query, time "
            "stamp, nonce or body changed after signing), got " + quoted(c.sig)};
  const int64_t skew = c.ts_ms - now_ms;
  if (skew > kWindowMs || skew < -kWindowMs)
    return {Failure::Timestamp, "authorization.ts: more than " + std::to_string(kWindowMs / 1000) +
                                    " s from the registry's clock (" + std::to_string(now_ms) + ", sent in " +
                                    kTimeHeader + "), got " + quoted(c.ts)};
  switch (remember(nonce_of(c.nonce), c.ts_ms, now_ms)) {
    case Failure::Replayed:
      return {Failure::Replayed, "authorization.nonce: already used (a replayed request), got " + quoted(c.nonce)};
    case Failure::CacheFull:
      return {Failure::CacheFull, "authorization.nonce: the registry remembers " + std::to_string(capacity_) +
                                      " nonces within the time window and takes no more until some expire; "
                                      "retry in a second, got " + quoted(c.nonce)};
    default:
      return {};
  }
}

Failure Verifier::remember(const Nonce& nonce, int64_t ts_ms, int64_t now_ms) {
  swarm::MutexLock lock(mu_);
  // A nonce whose time stamp is out of the window cannot come back: its time stamp is refused.
  while (!by_ts_.empty() && by_ts_.begin()->first < now_ms - kWindowMs) {
    seen_.erase(by_ts_.begin()->second);
    by_ts_.erase(by_ts_.begin());
  }
  if (seen_.count(nonce)) return Failure::Replayed;
  if (seen_.size() >= capacity_) return Failure::CacheFull;
  seen_.insert(nonce);
  by_ts_.emplace(ts_ms, nonce);
  return Failure::None;
}

size_t Verifier::remembered() const {
  swarm::MutexLock lock(mu_);
  return seen_.size();
}

}  // namespace swarm::registry::auth
