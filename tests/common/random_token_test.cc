#include "common/random_token.h"

#include <gtest/gtest.h>

#include <set>

namespace swarm {
namespace {

TEST(RandomToken, IsLowerCaseHexOfTwiceTheBytes) {
  const std::string t = random_hex_token();
  EXPECT_EQ(t.size(), 64u);
  EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
  EXPECT_EQ(random_hex_token(5).size(), 10u);
  EXPECT_EQ(random_hex_token(0), "");
}

TEST(RandomToken, TokensDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(random_hex_token(16));
  EXPECT_EQ(seen.size(), 100u);
}

}  // namespace
}  // namespace swarm
