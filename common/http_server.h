// The project's HTTP/1.1 server (Asio, plain TCP): the registry's REST API and the /metrics
// endpoints of the operator and the data plane. It exists because cpprest's listener reads every
// request body into an unbounded buffer before (and whether or not) the handler looks at it: an
// unauthenticated 300 MiB chunked upload cost the registry 600 MB of memory. This one holds at most
// one request per connection, bounded by ServerOptions::limits (common/http_parser.h), and refuses
// a larger body as soon as its size is known, before any handler (and so any authentication) runs.
//
// Per connection: requests are read and answered one at a time (keep-alive and pipelining); the
// handler runs on one of `threads` I/O threads. The server answers by itself, with
// {"error": "..."} and Connection: close, what the parser refuses (400, 411, 413, 431, 501, 505),
// a request not complete within request_timeout (408), connections past max_connections (503)
// and a handler that throws (500). After a reply that closes the connection it reads and discards
// what the client still sends, for at most `linger`, so that a client still uploading reads the
// reply instead of a reset.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/http_message.h"
#include "common/http_parser.h"

namespace swarm::http {

struct ServerOptions {
  Limits limits;  // max_body_bytes (1 MiB), max_head_bytes (64 KiB)
  // From a request's first byte to its last, and for writing its reply: past it, 408 and close.
  std::chrono::milliseconds request_timeout{10'000};
  // A kept-alive connection waiting for its next request is closed after this long.
  std::chrono::milliseconds idle_timeout{60'000};
  // How long to drain a client's unread upload after a closing reply.
  std::chrono::milliseconds linger{2'000};
  int threads = 2;
  size_t max_connections = 1024;  // worst case memory: max_connections * (limits + 16 KiB)
  // Called on every reply before it is written, the server's own refusals included (the registry
  // stamps its clock on each).
  std::function<void(Response&)> finish;
};

using Handler = std::function<Response(const Request&)>;

class Server {
 public:
  // `port` 0: the kernel picks one at start() (port() then tells it). `host` is a name or an
  // address; the first address it resolves to is bound.
  Server(std::string host, int port, Handler handler, ServerOptions options = {});
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves; throws std::runtime_error naming host and port if it cannot, or if started.
  void start();
  // Stops serving (idempotent): closes the listener and every connection; a reply being written
  // is cut. Returns once no handler runs.
  void stop();
  // The bound port once started (the requested one before).
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::http
