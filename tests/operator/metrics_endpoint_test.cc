// The operator's /metrics endpoint (operator/controller/metrics.h) on loopback: what it serves,
// and that a client cannot make it hold a body: a 300 MiB upload is refused while it is sent and
// this process's peak memory stays where it was (each TEST runs in a process of its own).
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "common/ports.h"
#include "operator/controller/metrics.h"
#include "tests/common/raw_http.h"

namespace swarm::op {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::RawConnection;
using testing::read_reply;

TEST(OperatorMetricsEndpoint, ServesMetricsAndProbesAndRefusesABodyWithoutHoldingIt) {
  OperatorMetrics m;
  m.set_leader(true);
  const int port = runtime::pick_free_port();
  m.serve("127.0.0.1", port);
  auto get = [&](const std::string& request) {
    RawConnection c(port);
    EXPECT_TRUE(c.send(request));
    return read_reply(c, Clock::now() + 20s);
  };
  testing::RawReply r = get("GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("swarm_operator_is_leader 1"), std::string::npos) << r.body;
  EXPECT_EQ(get("GET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n").status, 200);
  EXPECT_EQ(get("GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n").status, 404);
  r = get("DELETE /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET, HEAD");
  EXPECT_EQ(get("PUT /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").status, 411);

  const long before_kb = testing::peak_rss_kb(::getpid());
  for (bool chunked : {true, false}) {
    SCOPED_TRACE(chunked ? "chunked" : "Content-Length");
    const testing::Upload u = testing::upload(port, "POST", "/metrics", size_t{300} << 20, chunked);
    const long after_kb = testing::peak_rss_kb(::getpid());
    std::cout << "operator metrics endpoint, 300 MiB " << (chunked ? "chunked" : "Content-Length")
              << " POST: answered " << u.reply.status << " after " << u.seconds << " s; this process's VmHWM "
              << before_kb << " kB -> " << after_kb << " kB" << std::endl;
    EXPECT_EQ(u.reply.status, 413) << u.reply.body;
    EXPECT_LT(u.seconds, 10.0);
    EXPECT_LT(after_kb - before_kb, 20 * 1024);
  }
  EXPECT_EQ(get("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n").status, 200);
}

}  // namespace
}  // namespace swarm::op
