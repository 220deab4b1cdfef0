// TCP client of the frame protocol: thread-safe request/reply calls over a small connection pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "worker/net/errors.h"
#include "worker/net/frame.h"
#include "worker/net/message.h"

namespace swarm::net {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  Limits limits;                        // applied to replies
  size_t max_idle_connections = 8;      // kept open between calls
  int socket_buffer_bytes = 4 << 20;    // SO_SNDBUF/SO_RCVBUF; 0 = kernel default (autotuning)
  Protection protection = Protection::Authenticated;  // must match the server's (session.h)
};

struct ClientStats {
  uint64_t bytes_in = 0;   // bytes read from sockets (whole frames)
  uint64_t bytes_out = 0;  // bytes written to sockets
  uint64_t calls = 0;      // calls that returned a reply
  uint64_t failures = 0;   // calls that threw (RemoteError included)
  uint64_t timeouts = 0;   // failures that were timeouts
  uint64_t connects = 0;   // connections opened (each with its own session handshake)
};

class Client {
 public:
  // Resolves nothing yet; connections open on demand. Throws std::invalid_argument for an empty
  // secret.
  Client(std::string host, uint16_t port, std::string secret, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` and waits for its reply; safe to call from many threads at once (each call
  // uses its own connection: an idle pooled one or a new one). The request id is assigned here.
  // `timeout` bounds the whole call: connect, write, wait and read.
  // Throws RemoteError when the peer answers with an Error message (code() is its ErrorCode),
  // NetError (timed_out() when the deadline passed) on connect failure, timeout, peer close or an
  // undecodable reply (an Error message with an unknown code or a malformed meta included), and
  // WireError when `request` itself is not a valid message. A connection is reused only after a
  // successful call.
  Message call(Message request, std::chrono::milliseconds timeout);

  ClientStats stats() const;
  const std::string& endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::net
