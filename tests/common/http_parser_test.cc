// common/http_parser.h: requests whole and byte by byte, pipelined, chunked; every limit at its
// edge; every refusal with its status and the field it names. And common/http_message.h's
// serialisation.
#include "common/http_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace swarm::http {
namespace {

using Status = RequestParser::Status;

constexpr size_t kMiB = 1 << 20;

// Feeds `bytes` whole, or `step` bytes at a time; returns the bytes taken.
size_t feed(RequestParser& p, const std::string& bytes, size_t step = 0) {
  if (step == 0) return p.feed(bytes);
  size_t used = 0;
  while (used < bytes.size() && p.status() == Status::NeedMore) {
    const size_t n = p.feed(std::string_view(bytes).substr(used, step));
    used += n;
    if (n < step && p.status() == Status::NeedMore && used < bytes.size()) ADD_FAILURE() << "took less while needing more";
  }
  return used;
}

std::string chunked(const std::string& head_extra, const std::string& chunks) {
  return "PUT /v1/peers/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n" + head_extra + "\r\n" + chunks;
}

Refusal refusal_of(const std::string& bytes, Limits limits = {}) {
  RequestParser p(limits);
  p.feed(bytes);
  EXPECT_EQ(p.status(), Status::Failed) << bytes.substr(0, 200);
  return p.refusal();
}

TEST(HttpParser, AGetWithHeadersWholeAndByteByByte) {
  const std::string bytes =
      "GET /v1/peers?role=worker&stage=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Thing:  spaced value \t\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    SCOPED_TRACE(step);
    RequestParser p;
    EXPECT_EQ(feed(p, bytes, step), bytes.size());
    ASSERT_EQ(p.status(), Status::Done);
    const Request r = p.take();
    EXPECT_EQ(r.method, "GET");
    EXPECT_EQ(r.target, "/v1/peers?role=worker&stage=1");
    EXPECT_EQ(r.path, "/v1/peers");
    EXPECT_EQ(r.query, "role=worker&stage=1");
    ASSERT_NE(r.header("x-thing"), nullptr);
    EXPECT_EQ(*r.header("x-thing"), "spaced value");
    EXPECT_EQ(r.header("X-Thing"), nullptr) << "names are looked up in lower case";
    EXPECT_TRUE(r.keep_alive());
    EXPECT_EQ(r.body, "");
    EXPECT_EQ(p.status(), Status::NeedMore);
    EXPECT_FALSE(p.started());
  }
}

TEST(HttpParser, PipelinedRequestsAreTakenOneByOne) {
  const std::string first = "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  const std::string second = "\r\nDELETE /b?x HTTP/1.1\r\nConnection: close\r\n\r\n";
  RequestParser p;
  EXPECT_EQ(p.feed(first + second), first.size());
  ASSERT_EQ(p.status(), Status::Done);
  EXPECT_EQ(p.take().body, "hello");
  EXPECT_EQ(p.feed(second), second.size());
  ASSERT_EQ(p.status(), Status::Done);
  const Request r = p.take();
  EXPECT_EQ(r.method, "DELETE");
  EXPECT_EQ(r.path, "/b");
  EXPECT_EQ(r.query, "x");
  EXPECT_FALSE(r.keep_alive());
}

TEST(HttpParser, ChunkedBodiesAreJoinedWithExtensionsAndTrailers) {
  const std::string bytes = chunked("", "5;name=value\r\nhello\r\n1\r\n \r\nA \r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n");
  for (size_t step : {size_t{0}, size_t{1}, size_t{3}}) {
    SCOPED_TRACE(step);
    RequestParser p;
    EXPECT_EQ(feed(p, bytes, step), bytes.size());
    ASSERT_EQ(p.status(), Status::Done) << p.refusal().message;
    EXPECT_EQ(p.take().body, "hello 0123456789");
  }
}

TEST(HttpParser, ABodyOfExactlyTheLimitIsReadOneMoreByteIsRefusedBeforeItArrives) {
  const Limits limits{kMiB, 64 << 10};
  {
    RequestParser p(limits);
    const std::string bytes = "PUT /x HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n" + std::string(kMiB, 'a');
    EXPECT_EQ(p.feed(bytes), bytes.size());
    ASSERT_EQ(p.status(), Status::Done);
    EXPECT_EQ(p.take().body.size(), kMiB);
  }
  {
    // Refused at the head: no body byte was sent.
    const Refusal r = refusal_of("PUT /x HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", limits);
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(r.message, "body: larger than 1048576 bytes, got 1048577 (Content-Length)");
  }
  {
    RequestParser p(limits);
    const std::string bytes = chunked("", "80000\r\n" + std::string(kMiB / 2, 'a') + "\r\n80000\r\n" +
                                              std::string(kMiB / 2, 'b') + "\r\n0\r\n\r\n");
    EXPECT_EQ(p.feed(bytes), bytes.size());
    ASSERT_EQ(p.status(), Status::Done) << p.refusal().message;
    EXPECT_EQ(p.take().body.size(), kMiB);
  }
  {
    // Refused at the chunk size that passes the limit, before its data.
    const Refusal r = refusal_of(chunked("", "80000\r\n" + std::string(kMiB / 2, 'a') + "\r\n80001\r\n"), limits);
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(r.message, "body: larger than 1048576 bytes, got at least 1048577 (chunked)");
  }
}

TEST(HttpParser, ChunkSizesThatWouldOverflowAreRefusedAsTooLarge) {
  for (const char* size : {"ffffffffffffffff", "10000000000000000", "fffffffffffffffffffffffffff"}) {
    SCOPED_TRACE(size);
    const Refusal r = refusal_of(chunked("", std::string(size) + "\r\n"));
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(r.message.rfind("body: larger than 1048576 bytes, got ", 0), 0u) << r.message;
  }
}

TEST(HttpParser, AnUploadWithoutALengthIsRefusedOtherMethodsHaveNoBody) {
  for (const char* method : {"PUT", "POST", "PATCH"}) {
    const Refusal r = refusal_of(std::string(method) + " /v1/peers/x HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(r.status, 411);
    EXPECT_EQ(r.message, "Content-Length: a " + std::string(method) +
                             " needs Content-Length or Transfer-Encoding: chunked, got neither");
  }
  for (const char* method : {"GET", "DELETE", "HEAD", "OPTIONS"}) {
    RequestParser p;
    p.feed(std::string(method) + " /x HTTP/1.1\r\n\r\n");
    EXPECT_EQ(p.status(), Status::Done) << method;
  }
}

TEST(HttpParser, FramingThatCouldBeReadTwoWaysIsRefused) {
  Refusal r = refusal_of("PUT /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.message, "Content-Length: not allowed with Transfer-Encoding, got \"3\"");
  r = refusal_of("PUT /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(r.message, "Transfer-Encoding: only chunked is supported, got \"gzip, chunked\"");
  for (const char* cl : {"abc", "-1", "", "5, 6", "1e3", "0x10", "12345678901234567890"}) {
    r = refusal_of("PUT /x HTTP/1.1\r\nContent-Length: " + std::string(cl) + "\r\n\r\n");
    EXPECT_EQ(r.status, 400) << cl;
    EXPECT_EQ(r.message.rfind("Content-Length: must be a number of bytes, got ", 0), 0u) << r.message;
  }
  r = refusal_of("PUT /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
  EXPECT_EQ(r.status, 400);
  RequestParser p;
  p.feed("PUT /x HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nok");
  ASSERT_EQ(p.status(), Status::Done);
  EXPECT_EQ(p.take().body, "ok");
}

TEST(HttpParser, AHeadOverTheLimitIsRefusedWithoutBeingHeld) {
  const Limits limits{kMiB, 1024};
  RequestParser p(limits);
  const std::string bytes = "GET /x HTTP/1.1\r\nX-Big: " + std::string(1 << 20, 'a');
  const size_t used = p.feed(bytes);
  ASSERT_EQ(p.status(), Status::Failed);
  EXPECT_LE(used, 1024u + 4u) << "the parser took more head bytes than its limit";
  EXPECT_EQ(p.refusal().status, 431);
  EXPECT_EQ(p.refusal().message, "head: request line and headers larger than 1024 bytes, got more");
  // Under the limit, a head of many small headers is fine; trailers share the budget.
  RequestParser q(limits);
  q.feed(chunked("", "0\r\nX-T: " + std::string(2000, 'b') + "\r\n\r\n"));
  ASSERT_EQ(q.status(), Status::Failed);
  EXPECT_EQ(q.refusal().status, 431);
}

TEST(HttpParser, MalformedRequestsAreRefusedNamingTheField) {
  const struct {
    std::string bytes;
    int status;
    std::string message;
  } cases[] = {
      {std::string("\x00\x01\x02garbage\r\n\r\n", 14), 400, "request line: not METHOD TARGET HTTP/1.1, got \"\\u0000\\u0001\\u0002garbage\""},
      {"GET /x\r\n\r\n", 400, "request line: not METHOD TARGET HTTP/1.1, got \"GET /x\""},
      {"GET /x HTTP/2.0\r\n\r\n", 505, "version: only HTTP/1.0 and HTTP/1.1 are served, got \"HTTP/2.0\""},
      {"GET /x SPDY\r\n\r\n", 400, "version: not HTTP/1.x, got \"SPDY\""},
      {"GET x HTTP/1.1\r\n\r\n", 400, "target: must start with /, got \"x\""},
      {"G(T /x HTTP/1.1\r\n\r\n", 400, "method: not a token, got \"G(T\""},
      {"GET /x HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400, "header: folded over lines (obsolete), got \" folded\""},
      {"GET /x HTTP/1.1\r\nno colon\r\n\r\n", 400, "header: not NAME: VALUE, got \"no colon\""},
      {"GET /x HTTP/1.1\r\nBad Name: v\r\n\r\n", 400, "header: not NAME: VALUE, got \"Bad Name: v\""},
      {"GET /x HTTP/1.1\r\nA: b\x01\r\n\r\n", 400, "A: control characters, got \"b\\u0001\""},
      {chunked("", "zz\r\n"), 400, "chunk size: must be hexadecimal, got \"zz\""},
      {chunked("", "5\r\nhello!!\r\n"), 400, "chunk: more data than its size, got \"!!\""},
      {chunked("", "5;" + std::string(2000, 'e') + "\r\n"), 400, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes.substr(0, 60));
    const Refusal r = refusal_of(c.bytes);
    EXPECT_EQ(r.status, c.status);
    if (!c.message.empty()) {
      EXPECT_EQ(r.message, c.message);
    }
  }
  // A refused chunk-size line was not kept whole either.
  const Refusal r = refusal_of(chunked("", "5;" + std::string(2000, 'e') + "\r\n"));
  EXPECT_EQ(r.message.rfind("chunk size: a line longer than 1024 bytes, got \"5;eee", 0), 0u) << r.message;
  EXPECT_LT(r.message.size(), 200u);
}

TEST(HttpParser, BlankLinesBeforeARequestAreSkippedAndDoNotStartIt) {
  RequestParser p;
  EXPECT_EQ(p.feed("\r\n\r\n"), 4u);
  EXPECT_FALSE(p.started());
  p.feed("G");
  EXPECT_TRUE(p.started());
  p.feed("ET / HTTP/1.0\n\n");  // bare LFs are line ends too
  ASSERT_EQ(p.status(), Status::Done);
  const Request r = p.take();
  EXPECT_EQ(r.version_minor, 0);
  EXPECT_FALSE(r.keep_alive());
}

TEST(HttpParser, ConnectionAndExpectHeaders) {
  RequestParser p;
  p.feed("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  EXPECT_TRUE(p.take().keep_alive());
  p.feed("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n");
  EXPECT_FALSE(p.take().keep_alive());
  p.feed("PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(p.expects_continue());
  p.feed("ok");
  EXPECT_EQ(p.status(), Status::Done);
  EXPECT_FALSE(p.expects_continue());
  EXPECT_EQ(p.take().body, "ok");
  p.feed("GET http://example.com:80/metrics?x=1 HTTP/1.1\r\n\r\n");
  const Request r = p.take();
  EXPECT_EQ(r.path, "/metrics");
  EXPECT_EQ(r.query, "x=1");
  p.feed("OPTIONS * HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.take().path, "*");
}

TEST(HttpMessage, SerializeWritesFramingAndNeutralisesLineBreaksInHeaders) {
  Response r{413, "{}", "application/json", {{"X-Evil", "a\r\nSet-Cookie: b"}}};
  EXPECT_EQ(serialize(r, false),
            "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            "X-Evil: a  Set-Cookie: b\r\nConnection: close\r\n\r\n{}");
  EXPECT_EQ(serialize(Response{200, "body", "text/plain"}, true, /*head_only=*/true),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n");
  const Response e = error_response(400, "x: \"quoted\"\n");
  EXPECT_EQ(e.body, R"({"error":"x: \"quoted\"\n"})");
  EXPECT_EQ(e.content_type, "application/json");
  EXPECT_STREQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_STREQ(reason_phrase(299), "Unknown");
}

}  // namespace
}  // namespace swarm::http
