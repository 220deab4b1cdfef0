#include "common/crypto.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

namespace swarm::crypto {
namespace {

std::string hex(const std::string& s) { return to_hex(s.data(), s.size()); }

// RFC 5869, appendix A.1 (basic test case with SHA-256).
TEST(Crypto, HkdfMatchesRfc5869TestCase1) {
  const std::string ikm(22, '\x0b');
  std::string salt, info;
  for (int i = 0; i <= 0x0c; ++i) salt.push_back(static_cast<char>(i));
  for (int i = 0xf0; i <= 0xf9; ++i) info.push_back(static_cast<char>(i));
  EXPECT_EQ(hex(hkdf_sha256(ikm, salt, info, 42)),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
}

TEST(Crypto, HkdfKeysDifferByPurposeAndRefuseBadInput) {
  EXPECT_NE(hkdf_sha256("secret", "", "swarm registry v1"), hkdf_sha256("secret", "", "swarm data v1"));
  EXPECT_EQ(hkdf_sha256("secret", "", "a").size(), 32u);
  EXPECT_THROW(hkdf_sha256("", "", "a"), std::invalid_argument);
  EXPECT_THROW(hkdf_sha256("k", "", "a", 0), std::invalid_argument);
  EXPECT_THROW(hkdf_sha256("k", "", "a", 8161), std::invalid_argument);
}

TEST(Crypto, Sha256OfAbc) {
  const auto d = sha256("abc", 3);
  EXPECT_EQ(to_hex(d.data(), d.size()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Crypto, RandomBytesDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(random_bytes(16));
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(random_bytes(0), "");
}

}  // namespace
}  // namespace swarm::crypto

namespace {
// FIPS 180-2's "abc" and the empty message.
TEST(Crypto, Sha256HexMatchesTheStandardVectors) {
  EXPECT_EQ(swarm::crypto::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(swarm::crypto::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
}  // namespace
