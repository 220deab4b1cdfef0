// common/http_server.h on loopback, driven by raw sockets: keep-alive and pipelining, the limits
// and timeouts a client cannot get past, the server's own replies and its start and stop.
#include "common/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/common/raw_http.h"

namespace swarm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::RawConnection;
using testing::RawReply;
using testing::read_reply;

class HttpServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}) {
    options.finish = [](Response& r) { r.headers.emplace_back("X-Finished", "1"); };
    server_ = std::make_unique<Server>("127.0.0.1", 0, [this](const Request& req) { return handle(req); }, options);
    server_->start();
    ASSERT_GT(server_->port(), 0);
  }
  Response handle(const Request& req) {
    ++handled_;
    if (req.path == "/throw") throw std::runtime_error("boom");
    return Response{200, req.method + " " + req.path + " " + std::to_string(req.body.size()), "text/plain"};
  }

  std::unique_ptr<Server> server_;
  std::atomic<int> handled_{0};
};

TEST_F(HttpServerTest, KeepAliveAndPipelinedRequestsOnOneConnection) {
  start();
  RawConnection c(server_->port());
  ASSERT_GE(c.fd(), 0);
  std::string leftover;
  ASSERT_TRUE(c.send("GET /a HTTP/1.1\r\nHost: h\r\n\r\n"));
  RawReply r = read_reply(c, Clock::now() + 10s, leftover);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /a 0");
  EXPECT_EQ(r.header("x-finished"), "1");
  EXPECT_EQ(r.headers.count("connection"), 0u);
  // Two at once, then the last one closes.
  ASSERT_TRUE(c.send("PUT /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n2\r\nxy\r\n0\r\n\r\n"));
  r = read_reply(c, Clock::now() + 10s, leftover);
  EXPECT_EQ(r.body, "PUT /b 3");
  r = read_reply(c, Clock::now() + 10s, leftover);
  EXPECT_EQ(r.body, "POST /c 2");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.closed_by(Clock::now() + 10s));
  EXPECT_EQ(handled_, 3);
}

TEST_F(HttpServerTest, AnOversizedChunkedUploadIsRefusedWhileItIsStillBeingSent) {
  ServerOptions o;
  o.limits.max_body_bytes = 64 << 10;
  start(o);
  RawConnection c(server_->port());
  ASSERT_TRUE(c.send("PUT /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "4000\r\n" + std::string(16 << 10, 'a') + "\r\n";
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.send(chunk));  // 80 KiB, and the upload not finished
  const RawReply r = read_reply(c, Clock::now() + 10s);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, R"j({"error":"body: larger than 65536 bytes, got at least 81920 (chunked)"})j");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(r.header("x-finished"), "1") << "the server's own replies pass through finish too";
  EXPECT_TRUE(c.closed_by(Clock::now() + 10s));
  EXPECT_EQ(handled_, 0);
}

TEST_F(HttpServerTest, AnUnfinishedRequestTimesOutAnIdleConnectionIsClosed) {
  ServerOptions o;
  o.request_timeout = 300ms;
  o.idle_timeout = 300ms;
  start(o);
  for (const char* partial : {"PUT /x HTTP/1.1\r\nContent-Length: 100\r\n\r\n{", "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                              "GET /x HTTP/1.1\r\nHost"}) {
    SCOPED_TRACE(partial);
    RawConnection c(server_->port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.send(partial));
    const RawReply r = read_reply(c, t0 + 10s);
    EXPECT_EQ(r.status, 408);
    EXPECT_EQ(r.body, R"({"error":"request: not complete within 300 ms, got part of one"})");
    EXPECT_GE(Clock::now() - t0, 250ms);
  }
  RawConnection idle(server_->port());
  const auto t0 = Clock::now();
  EXPECT_TRUE(idle.closed_by(t0 + 10s));
  EXPECT_GE(Clock::now() - t0, 250ms);
  EXPECT_EQ(handled_, 0);
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimReplyThenTheAnswer) {
  start();
  RawConnection c(server_->port());
  ASSERT_TRUE(c.send("PUT /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  std::string leftover;
  RawReply r = read_reply(c, Clock::now() + 10s, leftover, /*keep_interim=*/true);
  EXPECT_EQ(r.status, 100);
  ASSERT_TRUE(c.send("data"));
  r = read_reply(c, Clock::now() + 10s, leftover);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "PUT /e 4");
  // Over the limit, it gets the refusal instead of the go-ahead.
  RawConnection big(server_->port());
  ASSERT_TRUE(big.send("PUT /e HTTP/1.1\r\nContent-Length: 99999999\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_EQ(read_reply(big, Clock::now() + 10s, leftover, true).status, 413);
}

TEST_F(HttpServerTest, AThrowingHandlerGets500AHeadRequestNoBody) {
  start();
  RawConnection c(server_->port());
  ASSERT_TRUE(c.send("GET /throw HTTP/1.1\r\n\r\n"));
  std::string leftover;
  RawReply r = read_reply(c, Clock::now() + 10s, leftover);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, R"({"error":"internal: boom, got GET /throw"})");
  ASSERT_TRUE(c.send("HEAD /h HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n"));
  r = read_reply(c, Clock::now() + 10s, leftover);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-length"), "9");  // "HEAD /h 0", not sent
  // read_reply took the HEAD's announced length from what followed: the next reply's bytes.
  EXPECT_EQ((r.body + leftover).rfind("HTTP/1.1 200 OK", 0), 0u) << r.body + leftover;
}

TEST_F(HttpServerTest, ConnectionsPastTheLimitGet503) {
  ServerOptions o;
  o.max_connections = 1;
  start(o);
  RawConnection first(server_->port());
  ASSERT_TRUE(first.send("GET /one HTTP/1.1\r\n\r\n"));
  std::string leftover;
  ASSERT_EQ(read_reply(first, Clock::now() + 10s, leftover).status, 200);  // it is open and counted now
  RawConnection second(server_->port());
  const RawReply r = read_reply(second, Clock::now() + 10s);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, R"({"error":"connections: at most 1 open, got one more"})");
  EXPECT_TRUE(first.send("GET /two HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(read_reply(first, Clock::now() + 10s, leftover).body, "GET /two 0");
}

TEST(HttpServer, StartStopAndPorts) {
  Handler ok = [](const Request&) { return Response{200, "ok"}; };
  Server a("127.0.0.1", 0, ok);
  a.start();
  EXPECT_THROW(a.start(), std::runtime_error);
  Server b("127.0.0.1", a.port(), ok);
  EXPECT_THROW(b.start(), std::runtime_error) << "two listeners on one port";
  const int port = a.port();
  a.stop();
  a.stop();
  RawConnection gone(port);
  EXPECT_LT(gone.fd(), 0) << "still listening after stop()";
  Server again("127.0.0.1", port, ok);
  again.start();
  RawConnection c(port);
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(read_reply(c, Clock::now() + 10s).body, "ok");
  EXPECT_THROW(Server("127.0.0.1", 65536, ok), std::invalid_argument);
  EXPECT_THROW(Server("127.0.0.1", 0, nullptr), std::invalid_argument);
  Server nowhere("no-such-host.invalid", 0, ok);
  EXPECT_THROW(nowhere.start(), std::runtime_error);
}

}  // namespace
}  // namespace swarm::http
