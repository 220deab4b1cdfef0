#include "common/http_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <asio.hpp>
#include <spdlog/spdlog.h>

#include "common/json_quote.h"
#include "common/thread_annotations.h"

namespace swarm::http {
namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;

// What the connections of one running server share.
struct Context {
  Context(Handler h, ServerOptions o) : handler(std::move(h)), options(std::move(o)) {}
  const Handler handler;
  const ServerOptions options;
  std::atomic<size_t> connections{0};
};

// One client connection. Every handler of its socket and timer runs on the socket's strand, so
// its members need no lock; the pending operations' handlers hold it alive.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<Context> ctx)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), ctx_(std::move(ctx)), parser_(ctx_->options.limits) {
    ctx_->connections.fetch_add(1);
  }
  ~Connection() { ctx_->connections.fetch_sub(1); }

  // Starts serving on the connection's strand; `over_limit`: refuses it with a 503 instead.
  void begin(bool over_limit) {
    asio::post(socket_.get_executor(), [self = shared_from_this(), over_limit] {
      asio::error_code ec;
      self->socket_.set_option(tcp::no_delay(true), ec);
      if (over_limit) {
        const std::string limit = std::to_string(self->ctx_->options.max_connections);
        return self->reply(error_response(503, "connections: at most " + limit + " open, got one more"), false);
      }
      self->arm(self->ctx_->options.idle_timeout);
      self->read();
    });
  }

 private:
  enum class State { Reading, Writing, Lingering, Closed };
  enum class After { Continue, Next, Linger };  // what follows a write

  void read() {
    if (read_pending_ || state_ == State::Closed) return;
    read_pending_ = true;
    socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
      self->on_read(ec, n);
    });
  }

  void on_read(const asio::error_code& ec, size_t n) {
    read_pending_ = false;
    if (state_ == State::Closed) return;
    if (state_ == State::Writing) return;  // a 408 is being written; what came is discarded
    if (ec) return close();                // the client is gone
    if (state_ == State::Lingering) return read();
    consume(std::string_view(buf_.data(), n));
  }

  void consume(std::string_view bytes) {
    const bool was_started = parser_.started();
    const size_t used = parser_.feed(bytes);
    if (!was_started && parser_.started()) arm(ctx_->options.request_timeout);
    switch (parser_.status()) {
      case RequestParser::Status::NeedMore:
        if (parser_.expects_continue() && !continued_) {
          continued_ = true;
          return write("HTTP/1.1 100 Continue\r\n\r\n", After::Continue);
        }
        return read();
      case RequestParser::Status::Failed:
        return reply(error_response(parser_.refusal().status, parser_.refusal().message), false);
      case RequestParser::Status::Done: {
        rest_.assign(bytes.substr(used));  // a pipelined next request
        const Request req = parser_.take();
        continued_ = false;
        return reply(handle(req), req.keep_alive(), req.method == "HEAD");
      }
    }
  }

  Response handle(const Request& req) {
    try {
      return ctx_->handler(req);
    } catch (const std::exception& e) {
      spdlog::error("http: {} {} failed: {}", req.method, req.path, e.what());
      return error_response(500, std::string("internal: ") + e.what() + ", got " + req.method + " " + req.path);
    } catch (...) {
      spdlog::error("http: {} {} failed", req.method, req.path);
      return error_response(500, "internal: unknown error, got " + req.method + " " + req.path);
    }
  }

  void reply(Response r, bool keep_alive, bool head_only = false) {
    if (ctx_->options.finish) {
      try {
        ctx_->options.finish(r);
      } catch (const std::exception& e) {
        spdlog::error("http: finishing a reply failed: {}", e.what());
      }
    }
    arm(ctx_->options.request_timeout);  // for writing it
    write(serialize(r, keep_alive, head_only), keep_alive ? After::Next : After::Linger);
  }

  void write(std::string bytes, After after) {
    state_ = State::Writing;
    out_ = std::move(bytes);
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this(), after](const asio::error_code& ec, size_t) {
      self->on_written(ec, after);
    });
  }

  void on_written(const asio::error_code& ec, After after) {
    if (state_ == State::Closed) return;
    if (ec) return close();
    out_.clear();
    if (after == After::Linger) return linger();
    state_ = State::Reading;
    if (after == After::Continue) return read();
    arm(ctx_->options.idle_timeout);
    if (rest_.empty()) return read();
    const std::string pending = std::move(rest_);
    rest_.clear();
    consume(pending);
  }

  // After a closing reply: no more requests, but what the client still sends is read and
  // dropped for a while, so that its unread upload does not turn the close into a reset that
  // could destroy the reply before the client reads it.
  void linger() {
    state_ = State::Lingering;
    asio::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    arm(ctx_->options.linger);
    read();
  }

  // One deadline at a time: a new one replaces the last (gen_ tells a stale expiry apart).
  void arm(std::chrono::milliseconds after) {
    const uint64_t gen = ++gen_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), gen](const asio::error_code& ec) {
      if (!ec) self->on_deadline(gen);
    });
  }

  void on_deadline(uint64_t gen) {
    if (gen != gen_ || state_ == State::Closed) return;
    if (state_ == State::Reading && parser_.started()) {
      const std::string ms = std::to_string(ctx_->options.request_timeout.count());
      return reply(error_response(408, "request: not complete within " + ms + " ms, got part of one"), false);
    }
    close();  // idle, a reply the client does not read, or lingering done
  }

  void close() {
    state_ = State::Closed;
    asio::error_code ec;
    timer_.cancel();
    socket_.close(ec);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  std::shared_ptr<Context> ctx_;
  RequestParser parser_;
  std::array<char, 16 << 10> buf_{};
  std::string rest_;  // bytes read past the request being answered
  std::string out_;   // the bytes being written
  State state_ = State::Reading;
  bool read_pending_ = false;
  bool continued_ = false;  // "100 Continue" sent for the current request
  uint64_t gen_ = 0;
};

// A started server: its I/O threads, listener and the connections' shared context.
struct Running {
  asio::io_context io;  // first: destroyed last, after everything that uses it
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  std::shared_ptr<Context> ctx;
  std::vector<std::thread> threads;
};

void accept(Running& r) {
  r.acceptor.async_accept(asio::make_strand(r.io), [&r](const asio::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, or a connection reset before it was accepted: try again shortly
      // rather than spin.
      spdlog::debug("http: accept failed: {}", ec.message());
      r.retry.expires_after(100ms);
      r.retry.async_wait([&r](const asio::error_code& e) {
        if (!e) accept(r);
      });
      return;
    }
    const bool over_limit = r.ctx->connections.load() >= r.ctx->options.max_connections;
    std::make_shared<Connection>(std::move(socket), r.ctx)->begin(over_limit);
    accept(r);
  });
}

void run_io(asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("http: an I/O handler failed: {}", e.what());
    }
  }
}

}  // namespace

struct Server::Impl {
  std::string host;
  std::atomic<int> port;
  Handler handler;
  ServerOptions options;
  swarm::Mutex mu;  // start() and stop()
  std::unique_ptr<Running> running GUARDED_BY(mu);
};

Server::Server(std::string host, int port, Handler handler, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  if (port < 0 || port > 65535)
    throw std::invalid_argument("http: port must be in [0, 65535], got " + std::to_string(port));
  if (!handler) throw std::invalid_argument("http: a server needs a handler");
  impl_->host = host.empty() ? "0.0.0.0" : std::move(host);
  impl_->port = port;
  impl_->handler = std::move(handler);
  impl_->options = std::move(options);
}

Server::~Server() { stop(); }

void Server::start() {
  swarm::MutexLock lock(impl_->mu);
  const std::string where = json_quote(impl_->host) + " port " + std::to_string(impl_->port.load());
  if (impl_->running) throw std::runtime_error("http: already serving on " + where);
  auto r = std::make_unique<Running>();
  r->ctx = std::make_shared<Context>(impl_->handler, impl_->options);
  asio::error_code ec;
  tcp::resolver resolver(r->io);
  const auto found = resolver.resolve(impl_->host, std::to_string(impl_->port.load()),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) throw std::runtime_error("http: cannot resolve " + where + ": " + ec.message());
  const tcp::endpoint ep = found.begin()->endpoint();
  r->acceptor.open(ep.protocol(), ec);
  if (!ec) r->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);  // past TIME_WAIT, not a live listener
  if (!ec) r->acceptor.bind(ep, ec);
  if (!ec) r->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("http: cannot listen on " + where + ": " + ec.message());
  impl_->port = r->acceptor.local_endpoint().port();
  accept(*r);
  const int threads = std::max(1, impl_->options.threads);
  for (int i = 0; i < threads; ++i) r->threads.emplace_back([io = &r->io] { run_io(*io); });
  impl_->running = std::move(r);
}

void Server::stop() {
  std::unique_ptr<Running> r;
  {
    swarm::MutexLock lock(impl_->mu);
    r = std::move(impl_->running);
  }
  if (!r) return;
  r->io.stop();
  for (auto& t : r->threads) t.join();
  // Destroying it closes the listener and, with the handlers that hold them, every connection.
}

int Server::port() const { return impl_->port.load(); }

}  // namespace swarm::http
