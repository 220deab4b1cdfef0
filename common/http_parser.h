// An incremental HTTP/1.1 request parser with hard limits: the server (common/http_server.h)
// feeds it bytes as they arrive and it holds at most one request's head and body, each within
// its limit. A body over the limit is refused as soon as its size is known — at the head for a
// Content-Length, at the first chunk size that passes it for Transfer-Encoding: chunked — and
// never stored. Pure code: no sockets, no clock (the server times requests out).
//
// Refusals (status, then the message, worded "<field>: <problem>, got <value>"):
//   400  a malformed request line, header, Content-Length or chunk; Content-Length together with
//        Transfer-Encoding (either could frame the body: refused rather than guessed)
//   411  POST, PUT or PATCH with neither Content-Length nor Transfer-Encoding (an upload whose end
//        is unknown)
//   413  a body over max_body_bytes
//   431  a request line and headers (or chunked trailers) over max_head_bytes
//   501  a Transfer-Encoding other than chunked
//   505  an HTTP version other than 1.0 and 1.1
// A request of another method without either header has no body (RFC 9112, 6.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/http_message.h"

namespace swarm::http {

struct Limits {
  size_t max_body_bytes = 1 << 20;  // the de-chunked body
  size_t max_head_bytes = 64 << 10;  // request line + headers; chunked trailers count too
};

struct Refusal {
  int status = 0;
  std::string message;
};

class RequestParser {
 public:
  enum class Status { NeedMore, Done, Failed };

  explicit RequestParser(Limits limits = {});

  // Consumes bytes of the current request from `bytes` and returns how many it took: all of them
  // while it needs more; fewer once Done (the rest begins the next request) or Failed.
  size_t feed(std::string_view bytes);

  Status status() const { return status_; }
  // Whether a byte of the current request has been seen (blank lines before one do not count).
  bool started() const { return started_; }
  // The head is complete, the body is not, and the client waits for "100 Continue" to send it.
  bool expects_continue() const { return expect_continue_ && phase_ != Phase::Head && status_ == Status::NeedMore; }
  // When Done: the request; the parser is then ready for the next one.
  Request take();
  // When Failed: why. The connection cannot be read on (where the next request starts is unknown).
  const Refusal& refusal() const { return refusal_; }

 private:
  enum class Phase { Head, Body, ChunkSize, ChunkData, ChunkEnd, Trailer };

  size_t feed_head(std::string_view bytes);
  size_t feed_chunked(std::string_view bytes);
  // Reads one line into line_ (without the LF); false while it is incomplete. Refuses one longer
  // than `max` with `status`.
  bool take_line(std::string_view bytes, size_t& used, size_t max, int status, const char* what);
  void parse_head();
  void parse_request_line(const std::string& line);
  void parse_framing();
  void on_chunk_size();
  void fail(int status, std::string message);
  void done();

  Limits limits_;
  Status status_ = Status::NeedMore;
  Phase phase_ = Phase::Head;
  bool started_ = false;
  bool expect_continue_ = false;
  std::string head_;      // the head so far (Head phase)
  size_t scanned_ = 0;    // head_ holds no end of head before this offset
  std::string line_;      // a chunk-size, chunk-end or trailer line so far
  size_t trailer_bytes_ = 0;
  uint64_t remaining_ = 0;  // body bytes still to come (Body, ChunkData)
  Request req_;
  Refusal refusal_;
};

}  // namespace swarm::http
