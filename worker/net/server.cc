#include "worker/net/server.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <list>
#include <stdexcept>
#include <thread>

#include "common/thread_annotations.h"
#include "worker/net/connection.h"

namespace swarm::net {

using detail::Clock;
using detail::Connection;

namespace {

bool would_block(const asio::error_code& ec) {
  return ec == asio::error::would_block || ec == asio::error::try_again;
}

}  // namespace

struct Server::Impl {
  struct Slot {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  std::string secret;
  Handler handler;
  ServerOptions opts;
  std::string endpoint;
  uint16_t port = 0;
  asio::io_context io;  // owns the sockets' services; never run (all I/O is poll-driven)
  asio::ip::tcp::acceptor acceptor{io};
  // A pipe: written once by stop(), wakes every poll(). Not guarded: set by bind() before any
  // thread starts, closed by stop() (life_mu) only after the threads that poll it were joined.
  int wake_r = -1, wake_w = -1;

  swarm::Mutex life_mu;  // start() and stop()
  bool started GUARDED_BY(life_mu) = false;
  bool stopped GUARDED_BY(life_mu) = false;
  std::atomic<bool> stopping{false};
  std::thread accept_thread GUARDED_BY(life_mu);
  swarm::Mutex mu;
  std::list<Slot> conns GUARDED_BY(mu);

  std::atomic<uint64_t> bytes_in{0}, bytes_out{0}, frames_in{0}, frames_out{0}, accepted{0},
      refused{0}, active{0}, bad_frames{0}, auth_failures{0}, handshake_failures{0}, handler_errors{0}, idle_closed{0};

  void bind(const std::string& host, uint16_t want_port) {
    asio::error_code ec;
    asio::ip::tcp::resolver resolver(io);
    auto results = resolver.resolve(host.empty() ? "0.0.0.0" : host, std::to_string(want_port),
                                    asio::ip::resolver_base::passive |
                                        asio::ip::resolver_base::numeric_service,
                                    ec);
    if (ec || results.empty()) throw NetError(endpoint, "cannot resolve bind address: " + ec.message());
    asio::ip::tcp::endpoint ep = results.begin()->endpoint();
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && opts.socket_buffer_bytes > 0) {
      // Set on the listener so accepted sockets inherit it before the window scale is agreed.
      acceptor.set_option(asio::socket_base::receive_buffer_size(opts.socket_buffer_bytes), ec);
      acceptor.set_option(asio::socket_base::send_buffer_size(opts.socket_buffer_bytes), ec);
      ec.clear();
    }
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) acceptor.non_blocking(true, ec);
    if (ec) throw NetError(endpoint, "cannot listen: " + ec.message());
    port = acceptor.local_endpoint().port();
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw NetError(endpoint, "pipe2 failed");
    wake_r = fds[0];
    wake_w = fds[1];
  }

  // Joins finished connection threads (all of them when `all`, after the acceptor stopped).
  void reap(bool all) EXCLUDES(mu) {
    std::list<Slot> finished;
    {
      swarm::MutexLock lock(mu);
      for (auto it = conns.begin(); it != conns.end();) {
        auto next = std::next(it);
        if (all || it->done.load()) finished.splice(finished.end(), conns, it);
        it = next;
      }
    }
    for (Slot& s : finished) {
      if (s.thread.joinable()) s.thread.join();
    }
  }

  void accept_loop() {
    while (!stopping.load()) {
      pollfd fds[2] = {{acceptor.native_handle(), POLLIN, 0}, {wake_r, POLLIN, 0}};
      int r = ::poll(fds, 2, 500);  // the timeout only paces reaping of finished threads
      reap(false);
      if (stopping.load() || (r > 0 && fds[1].revents != 0)) return;
      if (r <= 0) continue;
      for (;;) {
        asio::ip::tcp::socket s(io);
        asio::error_code ec;
        acceptor.accept(s, ec);
        if (would_block(ec)) break;
        if (ec) {  // out of descriptors or memory: back off rather than spin
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          break;
        }
        try {
          admit(std::move(s));
        } catch (const std::exception&) {
          // Could not set up this one connection (socket option, memory): it is dropped.
        }
      }
    }
  }

  void admit(asio::ip::tcp::socket s) EXCLUDES(mu) {
    asio::error_code ec;
    auto remote = s.remote_endpoint(ec);
    std::string peer = ec ? std::string("unknown peer")
                          : detail::endpoint_text(remote.address().to_string(), remote.port());
    detail::tune_socket(s, opts.socket_buffer_bytes);
    if (active.load() >= opts.max_connections) {
      refused.fetch_add(1);
      Connection c(std::move(s), peer, &bytes_in, &bytes_out, wake_r);
      try {
        c.set_deadline(Clock::now() + std::chrono::milliseconds(100));
        c.handshake(secret, opts.protection, false);
        c.send(make_error(0, "server busy: " + std::to_string(opts.max_connections) +
                                 " connections open (max_connections)", ErrorCode::Busy));
      } catch (const std::exception&) {
      }
      c.close_gracefully(std::chrono::milliseconds(0));
      return;
    }
    accepted.fetch_add(1);
    active.fetch_add(1);
    swarm::MutexLock lock(mu);
    conns.emplace_back();
    Slot* slot = &conns.back();
    try {
      slot->thread = std::thread([this, slot, peer, sock = std::move(s)]() mutable {
        serve(std::move(sock), peer);
        active.fetch_sub(1);
        slot->done.store(true);
      });
    } catch (const std::system_error&) {  // no thread: drop the connection
      conns.pop_back();
      active.fetch_sub(1);
    }
  }

  // Answers a rejected frame with an Error, then closes.
  void reject(Connection& c, uint64_t request_id, const std::string& what, ErrorCode code) {
    try {
      c.set_deadline(Clock::now() + std::chrono::milliseconds(1000));
      c.send(make_error(request_id, what, code));
    } catch (const std::exception&) {
    }
    c.close_gracefully(opts.error_linger);
  }

  void serve(asio::ip::tcp::socket sock, const std::string& peer) {
    std::unique_ptr<Connection> conn;
    try {
      conn = std::make_unique<Connection>(std::move(sock), peer, &bytes_in, &bytes_out, wake_r);
    } catch (const std::exception&) {
      return;
    }
    Connection& c = *conn;  // outlives the handlers below: stats update before the socket closes
    try {
      c.set_deadline(Clock::now() + opts.handshake_timeout);
      c.handshake(secret, opts.protection, false);
    } catch (const std::exception&) {
      handshake_failures.fetch_add(1);
      return;
    }
    try {
      while (!stopping.load()) {
        c.set_deadline(Clock::time_point::max(), opts.idle_timeout);
        FrameHeader header;
        header.request_id = 0;  // set by receive() once the header is valid
        Message req;
        try {
          req = c.receive(opts.limits, &header);
        } catch (const AuthError&) {
          bad_frames.fetch_add(1);
          auth_failures.fetch_add(1);
          return reject(c, header.request_id, "unauthenticated", ErrorCode::Unauthenticated);
        } catch (const WireError& e) {
          bad_frames.fetch_add(1);
          return reject(c, header.request_id, e.what(), ErrorCode::BadFrame);
        } catch (const std::bad_alloc&) {
          bad_frames.fetch_add(1);
          return reject(c, header.request_id, "out of memory for the request's tensors", ErrorCode::BadFrame);
        }
        frames_in.fetch_add(1);
        uint64_t id = req.request_id;
        Message rep;
        try {
          rep = handler(std::move(req));
        } catch (const std::exception& e) {
          handler_errors.fetch_add(1);
          rep = error_reply(id, e);  // a CodedError keeps its code
        } catch (...) {
          handler_errors.fetch_add(1);
          rep = make_error(id, "handler threw a non-standard exception");
        }
        rep.request_id = id;
        OutFrame frame;
        try {
          frame = prepare_frame(rep);
        } catch (const WireError& e) {
          handler_errors.fetch_add(1);
          rep = make_error(id, std::string("handler returned an invalid reply: ") + e.what());
          frame = prepare_frame(rep);
        }
        c.set_deadline(Clock::time_point::max(), opts.idle_timeout);
        c.send(frame, rep);
        frames_out.fetch_add(1);
      }
    } catch (const NetError& e) {
      if (e.timed_out()) idle_closed.fetch_add(1);  // else peer closed, reset, or stop()
    } catch (const std::exception&) {
      // Never let a connection take the process down.
    }
  }
};

Server::Server(std::string bind_host, uint16_t port, std::string secret, Handler handler,
               ServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (secret.empty()) throw std::invalid_argument("Server: the job secret must not be empty");
  if (!handler) throw std::invalid_argument("Server: the handler must not be empty");
  impl_->secret = std::move(secret);
  impl_->handler = std::move(handler);
  impl_->opts = options;
  impl_->endpoint = detail::endpoint_text(bind_host.empty() ? "0.0.0.0" : bind_host, port);
  impl_->bind(bind_host, port);
}

Server::Server(std::string bind_host, uint16_t port, std::string secret, Handler handler,
               Limits limits)
    : Server(std::move(bind_host), port, std::move(secret), std::move(handler),
             ServerOptions{limits}) {}

Server::~Server() { stop(); }

uint16_t Server::port() const { return impl_->port; }

void Server::start() {
  swarm::MutexLock lock(impl_->life_mu);
  if (impl_->started || impl_->stopped) return;
  impl_->started = true;
  impl_->accept_thread = std::thread([this] { impl_->accept_loop(); });
}

void Server::stop() {
  swarm::MutexLock lock(impl_->life_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping.store(true);
  if (impl_->wake_w >= 0) {
    char b = 1;
    [[maybe_unused]] ssize_t n = ::write(impl_->wake_w, &b, 1);
  }
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  impl_->reap(true);
  asio::error_code ec;
  impl_->acceptor.close(ec);
  for (int* fd : {&impl_->wake_r, &impl_->wake_w}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

ServerStats Server::stats() const {
  const Impl& i = *impl_;
  ServerStats s;
  s.bytes_in = i.bytes_in.load();
  s.bytes_out = i.bytes_out.load();
  s.frames_in = i.frames_in.load();
  s.frames_out = i.frames_out.load();
  s.connections_accepted = i.accepted.load();
  s.connections_refused = i.refused.load();
  s.connections_active = i.active.load();
  s.bad_frames = i.bad_frames.load();
  s.auth_failures = i.auth_failures.load();
  s.handshake_failures = i.handshake_failures.load();
  s.handler_errors = i.handler_errors.load();
  s.idle_closed = i.idle_closed.load();
  return s;
}

}  // namespace swarm::net
