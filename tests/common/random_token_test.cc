#include "common/random_token.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <stdexcept>

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

TEST(RandomToken, AKeptTokenIsWrittenOnceWithMode0600AndReadBack) {
  char tmpl[] = "/tmp/kept-token-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/job-secret";
  const std::string first = kept_token(path);
  EXPECT_EQ(first.size(), 64u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(kept_token(path), first);  // a later run gets the same one
  std::ofstream(path, std::ios::trunc) << "";
  EXPECT_NE(kept_token(path), first);  // empty: a fresh one
  std::remove(path.c_str());
  ::rmdir(tmpl);
  EXPECT_THROW(kept_token("/proc/no-such-dir/job-secret"), std::runtime_error);
}

}  // namespace
}  // namespace swarm
