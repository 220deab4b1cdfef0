// The registry's request bodies are bounded while they are read, before authentication: a real
// registry in a process of its own (registry_serve) is sent what an unauthenticated client could
// send — a 300 MiB upload, chunked or with its length, an upload of unknown length, one that
// never ends — and its peak memory (VmHWM) and its answers are checked; bodies at the limit are
// still served.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "registry/registry_service.h"
#include "registry/request_auth.h"
#include "registry/wire.h"
#include "tests/common/raw_http.h"
#include "tests/planner/peer_records.h"

namespace swarm::registry {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::peak_rss_kb;
using testing::RawConnection;
using testing::RawReply;
using testing::read_reply;
using testing::Upload;

constexpr const char* kSecret = "registry-body-test-secret-0123456789";
constexpr size_t kMiB = 1 << 20;
constexpr int kRequestTimeoutMs = 1000;  // registry_serve's: how long an unfinished request may take

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class RegistryBody : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("registry-body-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string log = (dir_ / "registry.log").string();
    subprocess::SpawnOptions o;
    o.log_path = log;
    o.append_log = false;
    registry_ = subprocess::Subprocess(REGISTRY_SERVE, {kSecret, std::to_string(kRequestTimeoutMs)}, o);
    const auto deadline = Clock::now() + 30s;
    while (port_ == 0 && Clock::now() < deadline && !registry_.poll()) {
      std::ifstream in(log);
      for (std::string line; std::getline(in, line);)
        if (line.rfind("port ", 0) == 0) port_ = std::atoi(line.c_str() + 5);
      if (port_ == 0) std::this_thread::sleep_for(20ms);
    }
    ASSERT_GT(port_, 0) << "registry_serve did not start; its log: " << log;
  }
  void TearDown() override {
    registry_.stop(5);
    fs::remove_all(dir_);
  }

  RawReply exchange(const std::string& bytes) {
    RawConnection c(port_);
    EXPECT_TRUE(c.send(bytes));
    return read_reply(c, Clock::now() + 20s);
  }

  // PUT /v1/peers/x of a valid record padded with spaces to exactly `size` bytes, signed.
  RawReply signed_put(size_t size, bool chunked) {
    std::string body = wire::to_json(testing::worker_record("x", 1, 7009)).dump();
    body.append(size - body.size(), ' ');
    const std::string authorization =
        auth::authorization(auth::registry_key(kSecret), "PUT", "/v1/peers/x", body, unix_ms(), auth::new_nonce());
    std::string bytes = "PUT /v1/peers/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: " +
                        authorization + "\r\n";
    if (chunked) {
      char size_line[32];
      std::snprintf(size_line, sizeof size_line, "%zx\r\n", body.size());
      bytes += "Transfer-Encoding: chunked\r\n\r\n" + std::string(size_line) + body + "\r\n0\r\n\r\n";
    } else {
      bytes += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    }
    return exchange(bytes);
  }

  fs::path dir_;
  subprocess::Subprocess registry_;
  int port_ = 0;
};

TEST_F(RegistryBody, A300MiBUploadIsRefusedPromptlyWithoutGrowingTheRegistry) {
  ASSERT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").status, 200);
  const long before_kb = peak_rss_kb(registry_.pid());
  ASSERT_GT(before_kb, 0);
  for (bool chunked : {true, false}) {
    SCOPED_TRACE(chunked ? "chunked" : "Content-Length");
    const Upload u = testing::upload(port_, "PUT", "/v1/peers/x", 300 * kMiB, chunked);
    const long after_kb = peak_rss_kb(registry_.pid());
    std::cout << "registry peak RSS (VmHWM) under a 300 MiB " << (chunked ? "chunked" : "Content-Length")
              << " upload: " << before_kb << " kB before, " << after_kb << " kB after (+" << (after_kb - before_kb) / 1024
              << " MB); answered " << u.reply.status << " after " << u.seconds << " s, " << u.sent_bytes / kMiB
              << " MiB sent by then" << std::endl;
    EXPECT_EQ(u.reply.status, 413) << u.reply.body;
    EXPECT_EQ(u.reply.header("connection"), "close");
    EXPECT_EQ(nlohmann::json::parse(u.reply.body, nullptr, false).value("error", "").rfind("body: larger than 1048576 bytes, got ", 0), 0u)
        << u.reply.body;
    EXPECT_FALSE(u.reply.header("x-swarm-time").empty()) << "the refusal carries the registry's clock too";
    EXPECT_LT(u.seconds, 10.0);
    EXPECT_LT(after_kb - before_kb, 20 * 1024) << "the registry's peak RSS grew by " << (after_kb - before_kb) << " kB";
  }
  EXPECT_EQ(exchange("GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").status, 200);
}

TEST_F(RegistryBody, AnUploadOfUnknownLengthIsRefusedOneThatNeverEndsTimesOut) {
  RawConnection c(port_);
  auto t0 = Clock::now();
  ASSERT_TRUE(c.send("PUT /v1/peers/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));  // and the connection stays open
  RawReply r = read_reply(c, t0 + 20s);
  EXPECT_EQ(r.status, 411) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body, nullptr, false).value("error", ""),
            "Content-Length: a PUT needs Content-Length or Transfer-Encoding: chunked, got neither");
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_TRUE(c.closed_by(Clock::now() + 10s));

  // Chunked, but no chunk ever comes: answered after the request timeout, not held forever.
  RawConnection stalled(port_);
  t0 = Clock::now();
  ASSERT_TRUE(stalled.send("PUT /v1/peers/x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  r = read_reply(stalled, t0 + 20s);
  const auto took = Clock::now() - t0;
  EXPECT_EQ(r.status, 408) << r.body;
  EXPECT_GE(took, std::chrono::milliseconds(kRequestTimeoutMs - 100));
  EXPECT_LT(took, std::chrono::milliseconds(kRequestTimeoutMs) + 4s);
  EXPECT_TRUE(stalled.closed_by(Clock::now() + 10s));
}

TEST_F(RegistryBody, ABodyOfExactly1MiBIsServedOneByteMoreIsRefused) {
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "Content-Length");
    RawReply r = signed_put(RegistryService::kMaxBodyBytes, chunked);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(nlohmann::json::parse(r.body, nullptr, false).contains("expiresInSeconds")) << r.body;
    r = signed_put(RegistryService::kMaxBodyBytes + 1, chunked);
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_EQ(nlohmann::json::parse(r.body, nullptr, false).value("error", ""),
              chunked ? "body: larger than 1048576 bytes, got at least 1048577 (chunked)"
                      : "body: larger than 1048576 bytes, got 1048577 (Content-Length)");
  }
}

}  // namespace
}  // namespace swarm::registry
