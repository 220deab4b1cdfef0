// TCP server of the frame protocol: one thread per connection, a synchronous handler per request.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "worker/net/errors.h"
#include "worker/net/frame.h"
#include "worker/net/message.h"

namespace swarm::net {

struct ServerOptions {
  Limits limits;                                   // applied to every request frame
  std::chrono::milliseconds idle_timeout{300000};  // a connection that sends nothing for this long
                                                   // (between or inside frames) is closed
  size_t max_connections = 256;                    // beyond it a new connection gets an Error
                                                   // "server busy ..." and is closed
  int socket_buffer_bytes = 4 << 20;               // SO_SNDBUF/SO_RCVBUF; 0 = kernel default
  std::chrono::milliseconds error_linger{1000};    // after rejecting a malformed frame: how long
                                                   // to discard the rest of it before closing
  Protection protection = Protection::Authenticated;  // clients must ask for the same (session.h)
  std::chrono::milliseconds handshake_timeout{10000};  // for a new connection's hello
};

struct ServerStats {
  uint64_t bytes_in = 0;   // bytes read from sockets
  uint64_t bytes_out = 0;  // bytes written to sockets
  uint64_t frames_in = 0;  // valid requests handed to the handler
  uint64_t frames_out = 0;
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections
  uint64_t connections_active = 0;
  uint64_t bad_frames = 0;      // rejected by the decoder (auth failures included)
  uint64_t auth_failures = 0;   // frames whose tag failed
  uint64_t handshake_failures = 0;  // connections whose hello was bad, late or asked for another protection
  uint64_t handler_errors = 0;  // handler threw, or returned an unencodable reply
  uint64_t idle_closed = 0;     // connections closed by idle_timeout
};

class Server {
 public:
  // Called on the connection's thread for every valid request; may block. The reply's
  // request_id is set to the request's. An exception becomes an Error reply with its text and,
  // for a CodedError, its code (the connection stays open).
  using Handler = std::function<Message(Message&&)>;

  // Binds and listens at once (port 0 = an ephemeral port, see port()); serves after start().
  // Throws std::invalid_argument for an empty secret or handler, NetError if binding fails.
  Server(std::string bind_host, uint16_t port, std::string secret, Handler handler,
         ServerOptions options = {});
  Server(std::string bind_host, uint16_t port, std::string secret, Handler handler, Limits limits);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  void start();
  // Closes the listener and every connection and joins all threads. Waits for handlers that are
  // running to return. Idempotent.
  void stop();
  ServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::net
