// s3://BUCKET[/PREFIX] parsing and the percent-encoding that SigV4 signs.
#include <gtest/gtest.h>

#include "common/s3_url.h"
#include "worker/storage/s3_client.h"

namespace {

TEST(S3Url, BucketAndPrefixAreSplitAndKeysJoined) {
  auto u = swarm::parse_s3_url("s3://my-bucket.eu/jobs/tiny-lm/");
  EXPECT_EQ(u.bucket, "my-bucket.eu");
  EXPECT_EQ(u.prefix, "jobs/tiny-lm");
  EXPECT_EQ(u.key("stage-0/step-000000001.ckpt"), "jobs/tiny-lm/stage-0/step-000000001.ckpt");
  EXPECT_EQ(u.url_of(u.key("x")), "s3://my-bucket.eu/jobs/tiny-lm/x");
  auto root = swarm::parse_s3_url("s3://abc");
  EXPECT_EQ(root.prefix, "");
  EXPECT_EQ(root.key("x"), "x");
}

TEST(S3Url, BadLocationsAreRefusedSayingWhy) {
  const std::pair<const char*, const char*> bad[] = {
      {"http://bucket/x", "must start with s3://"},
      {"s3://ab/x", "3 to 63 characters"},
      {"s3://My_Bucket/x", "lowercase letters"},
      {"s3://-bucket/x", "start and end with a letter or digit"},
      {"s3://bucket//x", "empty"},
      {"s3://bucket/a/../b", "\"..\""},
      {"s3://bucket/a\nb", "control character"},
  };
  for (const auto& [url, why] : bad) {
    const auto problem = swarm::s3_url_problem(url);
    ASSERT_TRUE(problem.has_value()) << url;
    EXPECT_NE(problem->find(why), std::string::npos) << url << ": " << *problem;
    EXPECT_THROW(swarm::parse_s3_url(url), std::invalid_argument) << url;
  }
  EXPECT_FALSE(swarm::s3_url_problem("s3://bucket").has_value());
}

TEST(S3Url, EncodingKeepsUnreservedCharactersAndSlashesOnlyWhereAsked) {
  using swarm::storage::s3_encode;
  EXPECT_EQ(s3_encode("a-Z_0.9~", false), "a-Z_0.9~");
  EXPECT_EQ(s3_encode("a b+c/d", true), "a%20b%2Bc/d");
  EXPECT_EQ(s3_encode("a b+c/d", false), "a%20b%2Bc%2Fd");
  EXPECT_EQ(s3_encode("\xc3\xbc", false), "%C3%BC");
}

}  // namespace
