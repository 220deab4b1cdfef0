// The S3 client's retries against a fake S3 on loopback (common/http_server.h) that answers
// 503 SlowDown until the test lets it succeed: while one request backs off between its tries,
// the client is free for another thread's request and for traffic().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "common/http_server.h"
#include "worker/storage/s3_client.h"

namespace swarm::storage {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kSlowDown =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>reduce your request rate"
    "</Message></Error>";

TEST(S3Retry, ABackingOffRequestLeavesTheClientToOtherThreads) {
  std::atomic<int> puts{0};
  std::atomic<bool> release{false};
  http::Server fake("127.0.0.1", 0, [&](const http::Request& req) {
    if (req.method == "GET") return http::Response{200, "object", "application/octet-stream"};
    ++puts;
    if (!release) return http::Response{503, kSlowDown, "application/xml"};
    return http::Response{200, "", "application/xml"};
  });
  fake.start();
  S3Settings s;
  s.endpoint = "http://127.0.0.1:" + std::to_string(fake.port());
  s.access_key = "key";
  s.secret_key = "secret";
  s.attempts = 8;  // back-offs of 0.2 s doubling: 25 s before the PUT would give up
  S3Client client(s);

  std::atomic<bool> put_done{false};
  std::string put_error = "not finished";
  std::thread putter([&] {
    try {
      client.put("bucket", "slow", "payload");
      put_error.clear();
    } catch (const std::exception& e) {
      put_error = e.what();
    }
    put_done = true;
  });
  const auto deadline = Clock::now() + 20s;
  while (puts < 1 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_GE(puts, 1) << "the PUT never reached the fake";

  // The PUT is between tries now (or in one): both calls get the handle before it is done.
  const S3Traffic seen = client.traffic();
  const std::optional<std::string> got = client.get("bucket", "other");
  const bool put_was_done = put_done;
  release = true;
  putter.join();

  EXPECT_FALSE(put_was_done) << "traffic() and get() waited for the retrying PUT to finish";
  EXPECT_GE(seen.requests, 1);
  EXPECT_LT(seen.requests, s.attempts);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "object");
  EXPECT_EQ(put_error, "") << "the PUT should succeed once the fake lets it";
  const S3Traffic after = client.traffic();
  EXPECT_EQ(after.requests, puts.load() + 1);  // every PUT try and the GET
  EXPECT_EQ(after.retries, puts.load() - 1);
}

}  // namespace
}  // namespace swarm::storage
