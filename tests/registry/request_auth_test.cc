// registry/request_auth.h in-process: the header's form, signatures, the time window, the nonce
// memory and its bound; and RegistryService's refusals (status, reason, headers, metrics).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "registry/registry_service.h"
#include "registry/request_auth.h"

namespace swarm::registry::auth {
namespace {

using nlohmann::json;

constexpr const char* kSecret = "unit-secret-0123456789";
constexpr int64_t kNow = 1'800'000'000'000;  // Unix ms
const std::string kNonce = "00112233445566778899aabbccddeeff";

std::string header(int64_t ts, const std::string& nonce = kNonce, const std::string& body = "{}") {
  return authorization(registry_key(kSecret), "POST", "/v1/events", body, ts, nonce);
}

TEST(RequestAuth, TheSignatureIsHmacOverTheDocumentedText) {
  const std::string key = crypto::hkdf_sha256(kSecret, "", "swarm registry v1");
  EXPECT_EQ(registry_key(kSecret), key);
  const auto body_hash = crypto::sha256("{}", 2);
  const std::string text = "SWARM-REG-V1\nPOST\n/v1/events\n" + std::to_string(kNow) + "\n" + kNonce + "\n" +
                           crypto::to_hex(body_hash.data(), body_hash.size());
  EXPECT_EQ(string_to_sign("POST", "/v1/events", std::to_string(kNow), kNonce, "{}"), text);
  const auto mac = crypto::hmac_sha256(key, text.data(), text.size());
  EXPECT_EQ(header(kNow), "SwarmHMAC ts=" + std::to_string(kNow) + ",nonce=" + kNonce +
                              ",sig=" + crypto::to_hex(mac.data(), mac.size()));
  EXPECT_THROW(registry_key(""), std::invalid_argument);
  const std::string n = new_nonce();
  EXPECT_EQ(n.size(), 32u);
  EXPECT_NE(n, new_nonce());
}

TEST(RequestAuth, AMalformedHeaderNamesTheFieldAndValue) {
  const std::string sig(64, 'a');
  const struct {
    std::string header;
    Failure failure;
    std::string message;
  } cases[] = {
      {"", Failure::Missing, "authorization: missing"},
      {"   ", Failure::Missing, "authorization: missing"},
      {"Bearer x", Failure::Malformed, "authorization: must start with \"SwarmHMAC \", got \"Bearer x\""},
      {"SwarmHMAC", Failure::Malformed, "must start with"},
      {"SwarmHMAC ts=12x,nonce=" + kNonce + ",sig=" + sig, Failure::Malformed,
       "authorization.ts: must be Unix milliseconds (1-15 digits), got \"12x\""},
      {"SwarmHMAC ts=-1,nonce=" + kNonce + ",sig=" + sig, Failure::Malformed, "authorization.ts:"},
      {"SwarmHMAC ts=1234567890123456,nonce=" + kNonce + ",sig=" + sig, Failure::Malformed, "authorization.ts:"},
      {"SwarmHMAC ts=1,nonce=ABC,sig=" + sig, Failure::Malformed,
       "authorization.nonce: must be 32 lowercase hex characters, got \"ABC\""},
      {"SwarmHMAC ts=1,nonce=" + std::string(32, 'A') + ",sig=" + sig, Failure::Malformed, "authorization.nonce:"},
      {"SwarmHMAC ts=1,nonce=" + kNonce + ",sig=" + sig.substr(1), Failure::Malformed,
       "authorization.sig: must be 64 lowercase hex characters"},
      {"SwarmHMAC ts=1,nonce=" + kNonce, Failure::Malformed, "authorization.sig: missing"},
      {"SwarmHMAC ts=1,ts=2,nonce=" + kNonce + ",sig=" + sig, Failure::Malformed, "authorization.ts: given twice"},
      {"SwarmHMAC ts=1,nonce=" + kNonce + ",sig=" + sig + ",x=1", Failure::Malformed, "unknown field \"x\""},
      {"SwarmHMAC ts=1;nonce=" + kNonce, Failure::Malformed, "authorization.ts:"},
      {"SwarmHMAC ts", Failure::Malformed, "fields must be name=value"},
      {"SwarmHMAC ts=1,nonce=" + kNonce + ",sig=" + sig + "\x01\xff", Failure::Malformed, "?"},
  };
  for (const auto& c : cases) {
    Credentials creds;
    const Verdict v = parse(c.header, creds);
    EXPECT_EQ(v.failure, c.failure) << c.header << ": " << v.message;
    EXPECT_NE(v.message.find(c.message), std::string::npos) << c.header << ": " << v.message;
  }
  Credentials creds;
  EXPECT_TRUE(parse(" SwarmHMAC sig=" + sig + ", nonce=" + kNonce + ", ts=42 ", creds).ok());  // any order, spaces
  EXPECT_EQ(creds.ts_ms, 42);
}

TEST(RequestAuth, TheVerifierChecksSignatureWindowAndNonce) {
  Verifier v(kSecret);
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(kNow), kNow).ok());
  EXPECT_EQ(v.verify("POST", "/v1/events", "{}", header(kNow), kNow).failure, Failure::Replayed);
  const std::string other = "ffeeddccbbaa99887766554433221100";
  // Every signed part counts: method, target, body.
  EXPECT_EQ(v.verify("PUT", "/v1/events", "{}", header(kNow, other), kNow).failure, Failure::BadSignature);
  EXPECT_EQ(v.verify("POST", "/v1/events?x=1", "{}", header(kNow, other), kNow).failure, Failure::BadSignature);
  EXPECT_EQ(v.verify("POST", "/v1/events", "{ }", header(kNow, other), kNow).failure, Failure::BadSignature);
  // The window: 60 s either way, inclusive.
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(kNow - kWindowMs, other), kNow).ok());
  const std::string third = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(v.verify("POST", "/v1/events", "{}", header(kNow - kWindowMs - 1, third), kNow).failure,
            Failure::Timestamp);
  EXPECT_EQ(v.verify("POST", "/v1/events", "{}", header(kNow + kWindowMs + 1, third), kNow).failure,
            Failure::Timestamp);
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(kNow + kWindowMs, third), kNow).ok());
  EXPECT_EQ(v.remembered(), 3u);
  // A nonce is forgotten once its time stamp is out of the window (it would be refused for that).
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(kNow + 2 * kWindowMs), kNow + 2 * kWindowMs).ok());
  EXPECT_EQ(v.remembered(), 2u);  // `other` (ts kNow - 60 s) and kNonce's first use are gone
  Verifier wrong("another-secret");
  EXPECT_EQ(wrong.verify("POST", "/v1/events", "{}", header(kNow), kNow).failure, Failure::BadSignature);
}

TEST(RequestAuth, AFullNonceMemoryRefusesRatherThanForgets) {
  Verifier v(kSecret, 2);
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(kNow, "00000000000000000000000000000001"), kNow).ok());
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(kNow, "00000000000000000000000000000002"), kNow).ok());
  const Verdict full = v.verify("POST", "/v1/events", "{}", header(kNow, "00000000000000000000000000000003"), kNow);
  EXPECT_EQ(full.failure, Failure::CacheFull) << full.message;
  EXPECT_NE(full.message.find("remembers 2 nonces"), std::string::npos) << full.message;
  // Still no replay while full, and room again once the first ones leave the window.
  EXPECT_EQ(v.verify("POST", "/v1/events", "{}", header(kNow, "00000000000000000000000000000001"), kNow).failure,
            Failure::Replayed);
  const int64_t later = kNow + kWindowMs + 1;
  EXPECT_TRUE(v.verify("POST", "/v1/events", "{}", header(later, "00000000000000000000000000000003"), later).ok());
  EXPECT_THROW(Verifier(kSecret, 0), std::invalid_argument);
  EXPECT_THROW(Verifier(""), std::invalid_argument);
}

// RegistryService with a secret: what a refusal looks like, and that it is counted.
TEST(RequestAuth, TheServiceRefusesWith401Or503AndCounts) {
  RegistryOptions o;
  o.secret = kSecret;
  o.auth_nonce_capacity = 1;
  int64_t now = kNow;
  o.unix_ms_clock = [&now] { return now; };
  RegistryService svc(o);
  EXPECT_EQ(svc.unix_now_ms(), kNow);
  HttpReply r = svc.handle("POST", "/v1/events", "", "{}");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(json::parse(r.body).value("reason", ""), "missing");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], std::make_pair(std::string("WWW-Authenticate"), std::string("SwarmHMAC")));
  r = svc.handle("POST", "/v1/events", "", R"({"kind":"handoffs","count":1})",
                 authorization(registry_key(kSecret), "POST", "/v1/events", R"({"kind":"handoffs","count":1})", now,
                               kNonce));
  EXPECT_EQ(r.status, 200) << r.body;
  r = svc.handle("GET", "/v1/peers", "role=worker", "",
                 authorization(registry_key(kSecret), "GET", "/v1/peers?role=worker", "", now, new_nonce()));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(json::parse(r.body).value("reason", ""), "cache_full");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  now += 2 * kWindowMs;  // the first nonce leaves the window: room again
  r = svc.handle("GET", "/v1/peers", "role=worker", "",
                 authorization(registry_key(kSecret), "GET", "/v1/peers?role=worker", "", now, new_nonce()));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(svc.handle("GET", "/v1/stats", "", "").status, 200);
  const std::string metrics = svc.handle("GET", "/metrics", "", "").body;
  EXPECT_NE(metrics.find("swarm_registry_auth_failures_total{reason=\"missing\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("swarm_registry_auth_failures_total{reason=\"cache_full\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("swarm_registry_auth_failures_total{reason=\"replayed\"} 0"), std::string::npos);
}

}  // namespace
}  // namespace swarm::registry::auth
