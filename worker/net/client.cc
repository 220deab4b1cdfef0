#include "worker/net/client.h"

#include <atomic>
#include <stdexcept>
#include <vector>

#include "common/thread_annotations.h"
#include "worker/net/connection.h"

namespace swarm::net {
namespace {

// The exception an Error reply becomes: RemoteError with its text and code, or NetError ("bad
// reply: ...") when its meta is not a valid Error meta (an unknown code included).
[[noreturn]] void throw_remote(const std::string& endpoint, const Message& m) {
  ErrorInfo info;
  try {
    info = decode_error(m);
  } catch (const WireError& e) {
    throw NetError(endpoint, std::string("bad reply: ") + e.what());
  }
  throw RemoteError(endpoint, info.text, info.code);
}

}  // namespace

using detail::Clock;
using detail::Connection;

struct Client::Impl {
  std::string host;
  uint16_t port;
  std::string secret;
  ClientOptions opts;
  std::string endpoint;
  asio::io_context io;  // owns the sockets' services; never run (all I/O is poll-driven)

  swarm::Mutex mu;
  std::vector<std::unique_ptr<Connection>> idle GUARDED_BY(mu);

  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> bytes_in{0}, bytes_out{0}, calls{0}, failures{0}, timeouts{0}, connects{0};

  std::unique_ptr<Connection> acquire(Clock::time_point deadline) EXCLUDES(mu) {
    {
      swarm::MutexLock lock(mu);
      while (!idle.empty()) {
        std::unique_ptr<Connection> c = std::move(idle.back());
        idle.pop_back();
        if (!c->stale()) return c;  // else the peer closed it while idle: drop it
      }
    }
    Clock::time_point connect_deadline = std::min(deadline, Clock::now() + opts.connect_timeout);
    asio::ip::tcp::socket s = detail::connect_tcp(io, host, port, connect_deadline,
                                                  opts.socket_buffer_bytes, endpoint);
    connects.fetch_add(1, std::memory_order_relaxed);
    auto c = std::make_unique<Connection>(std::move(s), endpoint, &bytes_in, &bytes_out);
    c->set_deadline(connect_deadline);
    c->handshake(secret, opts.protection, true);
    return c;
  }

  void release(std::unique_ptr<Connection> c) EXCLUDES(mu) {
    swarm::MutexLock lock(mu);
    if (idle.size() < opts.max_idle_connections) idle.push_back(std::move(c));
  }

  Message call(Message& req, std::chrono::milliseconds timeout) {
    Clock::time_point deadline = Clock::now() + timeout;
    req.request_id = next_id.fetch_add(1, std::memory_order_relaxed);
    OutFrame frame = prepare_frame(req);  // WireError here: the caller's message is bad
    std::unique_ptr<Connection> c;
    try {
      c = acquire(deadline);
    } catch (const RemoteError&) {
      throw;  // the server refused the connection (busy): it answered, it did not act
    } catch (const NetError& e) {
      throw e.unsent();
    }
    c->set_deadline(deadline);
    try {
      c->send(frame, req);
    } catch (const NetError&) {
      // The server may have rejected the frame early and closed; surface its Error reply if it
      // is already here rather than a bare "connection reset".
      Message early;
      bool got = false;
      try {
        c->set_deadline(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
        early = c->receive(opts.limits);
        got = early.type == Error;
      } catch (const std::exception&) {
      }
      if (got) throw_remote(endpoint, early);
      throw;
    }
    Message rep;
    try {
      rep = c->receive(opts.limits);
    } catch (const AuthError& e) {
      throw NetError(endpoint, std::string("bad reply: ") + e.what() +
                                   " (is the job secret the same on both sides?)");
    } catch (const WireError& e) {
      throw NetError(endpoint, std::string("bad reply: ") + e.what());
    }
    // An Error reply: the server may close after it, so the connection is not reused.
    if (rep.type == Error) throw_remote(endpoint, rep);
    if (rep.request_id != req.request_id) {
      throw NetError(endpoint, "reply request_id " + std::to_string(rep.request_id) +
                                   " does not match request " + std::to_string(req.request_id));
    }
    release(std::move(c));
    return rep;
  }
};

Client::Client(std::string host, uint16_t port, std::string secret, ClientOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (secret.empty()) throw std::invalid_argument("Client: the job secret must not be empty");
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->secret = std::move(secret);
  impl_->opts = options;
  impl_->endpoint = detail::endpoint_text(impl_->host, port);
}

Client::~Client() = default;

Message Client::call(Message request, std::chrono::milliseconds timeout) {
  uint16_t type = request.type;
  try {
    Message rep = impl_->call(request, timeout);
    impl_->calls.fetch_add(1, std::memory_order_relaxed);
    return rep;
  } catch (const NetError& e) {
    impl_->failures.fetch_add(1, std::memory_order_relaxed);
    if (!e.timed_out()) throw;
    impl_->timeouts.fetch_add(1, std::memory_order_relaxed);
    std::string detail = e.what();  // "<endpoint>: <what> [timed out]" -> "<what>"
    const std::string tail = " [timed out]";
    if (detail.size() >= tail.size() && detail.compare(detail.size() - tail.size(), tail.size(), tail) == 0) {
      detail.resize(detail.size() - tail.size());
    }
    if (detail.compare(0, e.endpoint().size() + 2, e.endpoint() + ": ") == 0) {
      detail = detail.substr(e.endpoint().size() + 2);
    }
    NetError timed_out(impl_->endpoint,
                       "call of type " + std::to_string(type) + " timed out after " +
                           std::to_string(timeout.count()) + " ms (" + detail + ")",
                       true);
    if (!e.request_sent()) throw timed_out.unsent();
    throw timed_out;
  } catch (...) {
    impl_->failures.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

ClientStats Client::stats() const {
  ClientStats s;
  s.bytes_in = impl_->bytes_in.load();
  s.bytes_out = impl_->bytes_out.load();
  s.calls = impl_->calls.load();
  s.failures = impl_->failures.load();
  s.timeouts = impl_->timeouts.load();
  s.connects = impl_->connects.load();
  return s;
}

const std::string& Client::endpoint() const { return impl_->endpoint; }

}  // namespace swarm::net
