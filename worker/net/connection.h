// Internal: one connected TCP socket with deadline-bounded I/O, and frames on top of it.
// Used by Client (pooled connections) and Server (one per connection thread). Includes Asio, so
// it stays out of the public headers.
//
// Why poll() and not plain Asio sync reads: Asio's synchronous operations ignore SO_RCVTIMEO (on
// EAGAIN they wait again, forever), so a peer that accepts and never answers would hang a call.
// The socket is put in non-blocking mode; every read/write is tried first and, on EAGAIN, waits
// with poll() on the native handle until min(call deadline, idle timeout). That gives real
// timeouts with no extra thread, no io_context run loop and no timer per call, and the same poll()
// also watches the server's wake-up pipe so stop() interrupts every blocked connection at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <asio.hpp>

#include "worker/net/frame.h"
#include "worker/net/message.h"
#include "worker/net/session.h"

namespace swarm::net::detail {

using Clock = std::chrono::steady_clock;

// Sets TCP_NODELAY and, when buffer_bytes > 0, SO_SNDBUF/SO_RCVBUF (set before connect/listen
// so the TCP window scale is negotiated for them).
void tune_socket(asio::ip::tcp::socket& s, int buffer_bytes);

// Connects to host:port within `deadline`, trying every resolved address. Throws NetError.
asio::ip::tcp::socket connect_tcp(asio::io_context& io, const std::string& host, uint16_t port,
                                  Clock::time_point deadline, int buffer_bytes,
                                  const std::string& endpoint);

// "host:port", with brackets for an IPv6 literal.
std::string endpoint_text(const std::string& host, uint16_t port);

class Connection : public ByteSource {
 public:
  // `wake_fd` >= 0: a descriptor that becomes readable when the owner is shutting down; any
  // wait then throws NetError("shutting down").
  Connection(asio::ip::tcp::socket sock, std::string peer, std::atomic<uint64_t>* bytes_in,
             std::atomic<uint64_t>* bytes_out, int wake_fd = -1);

  // Every wait ends by `deadline` and lasts at most `idle` (no progress for `idle` = timeout).
  void set_deadline(Clock::time_point deadline,
                    std::chrono::milliseconds idle = std::chrono::milliseconds::max());

  // The session handshake (session.h), within the current deadline: hellos, keys, confirmations.
  // NetError when the peer's hello is bad or asks for another protection (the message names
  // both), when its confirmation fails (it does not hold the job's secret), or on a connection
  // error / timeout.
  void handshake(const std::string& secret, Protection protection, bool is_client);
  bool has_session() const { return session_.tx != nullptr; }

  // Frames, sealed and opened by the session. send() writes with one gather list (straight from
  // the tensors' memory when only authenticated); receive() reads header, meta, each descriptor,
  // then the tensor bytes straight into the tensor's buffer (decrypted there). WireError for a
  // bad frame, AuthError for a failed tag, NetError for the connection.
  void send(const Message& m);
  void send(OutFrame& prepared, const Message& m);
  Message receive(const Limits& limits, FrameHeader* header = nullptr);

  // ByteSource
  void read(void* dst, size_t n, const char* field, long index) override;

  void write_all(const std::vector<Piece>& pieces);

  // True when an idle connection can no longer be used: the peer closed it, reset it, or sent
  // bytes nobody asked for.
  bool stale();

  // Half-closes (our FIN goes after anything queued), discards what the peer still sends for up
  // to `linger`, then closes; lets the peer read an Error reply instead of getting a reset.
  void close_gracefully(std::chrono::milliseconds linger);

  const std::string& peer() const { return peer_; }

 private:
  void wait(short events, const char* doing);

  asio::ip::tcp::socket sock_;
  std::string peer_;
  std::atomic<uint64_t>* bytes_in_;
  std::atomic<uint64_t>* bytes_out_;
  int wake_fd_;
  Session session_;
  std::unique_ptr<uint8_t[]> staging_;  // send(): kChunkBytes, allocated on first use
  Clock::time_point deadline_ = Clock::time_point::max();
  std::chrono::milliseconds idle_ = std::chrono::milliseconds::max();
};

}  // namespace swarm::net::detail
