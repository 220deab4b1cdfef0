#include "worker/net/connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace swarm::net::detail {

namespace {

using std::chrono::milliseconds;

// poll() timeout in ms until `limit` (rounded up, clamped); 0 when it has passed.
int ms_until(Clock::time_point limit) {
  auto now = Clock::now();
  if (limit <= now) return 0;
  auto ms = std::chrono::ceil<milliseconds>(limit - now).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

bool would_block(const asio::error_code& ec) {
  return ec == asio::error::would_block || ec == asio::error::try_again;
}

}  // namespace

std::string endpoint_text(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

void tune_socket(asio::ip::tcp::socket& s, int buffer_bytes) {
  asio::error_code ec;  // best effort: a refused option only costs speed
  s.set_option(asio::ip::tcp::no_delay(true), ec);
  if (buffer_bytes > 0) {
    s.set_option(asio::socket_base::send_buffer_size(buffer_bytes), ec);
    s.set_option(asio::socket_base::receive_buffer_size(buffer_bytes), ec);
  }
}

asio::ip::tcp::socket connect_tcp(asio::io_context& io, const std::string& host, uint16_t port,
                                  Clock::time_point deadline, int buffer_bytes,
                                  const std::string& endpoint) {
  asio::ip::tcp::resolver resolver(io);
  asio::error_code ec;
  auto results = resolver.resolve(host, std::to_string(port),
                                  asio::ip::resolver_base::numeric_service, ec);
  if (ec) throw NetError(endpoint, "cannot resolve host: " + ec.message());
  std::string last = "no address";
  for (const auto& entry : results) {
    auto ep = entry.endpoint();
    asio::ip::tcp::socket s(io);
    s.open(ep.protocol(), ec);
    if (ec) {
      last = ec.message();
      continue;
    }
    tune_socket(s, buffer_bytes);
    s.non_blocking(true, ec);
    // A plain non-blocking connect + poll: Asio's sync connect waits without a time limit.
    if (::connect(s.native_handle(), ep.data(), static_cast<socklen_t>(ep.size())) == 0) return s;
    if (errno != EINPROGRESS && errno != EINTR) {
      last = std::strerror(errno);
      continue;
    }
    for (;;) {
      int ms = ms_until(deadline);
      if (ms == 0) throw NetError(endpoint, "connect timed out", true);
      pollfd pfd{s.native_handle(), POLLOUT, 0};
      int r = ::poll(&pfd, 1, ms);
      if (r > 0) break;
      if (r < 0 && errno != EINTR) throw NetError(endpoint, std::string("poll: ") + std::strerror(errno));
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) return s;
    last = std::strerror(err);
  }
  throw NetError(endpoint, "connect failed: " + last);
}

Connection::Connection(asio::ip::tcp::socket sock, std::string peer,
                       std::atomic<uint64_t>* bytes_in, std::atomic<uint64_t>* bytes_out,
                       int wake_fd)
    : sock_(std::move(sock)),
      peer_(std::move(peer)),
      bytes_in_(bytes_in),
      bytes_out_(bytes_out),
      wake_fd_(wake_fd) {
  sock_.non_blocking(true);
}

void Connection::set_deadline(Clock::time_point deadline, milliseconds idle) {
  deadline_ = deadline;
  idle_ = idle;
}

void Connection::wait(short events, const char* doing) {
  Clock::time_point limit = deadline_;
  bool idle_limited = false;
  if (idle_ != milliseconds::max()) {
    Clock::time_point idle_end = Clock::now() + idle_;
    if (idle_end < limit) {
      limit = idle_end;
      idle_limited = true;
    }
  }
  for (;;) {
    int ms = ms_until(limit);
    if (ms == 0) {
      std::string why = idle_limited ? "no data for " + std::to_string(idle_.count()) + " ms"
                                     : std::string("deadline passed");
      throw NetError(peer_, std::string("timed out ") + doing + " (" + why + ")", true);
    }
    pollfd fds[2] = {{sock_.native_handle(), events, 0}, {wake_fd_, POLLIN, 0}};
    int r = ::poll(fds, wake_fd_ >= 0 ? 2 : 1, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw NetError(peer_, std::string("poll: ") + std::strerror(errno));
    }
    if (r == 0) continue;
    if (wake_fd_ >= 0 && fds[1].revents != 0) throw NetError(peer_, "shutting down");
    if (fds[0].revents != 0) return;  // ready, or error/hang-up: the next call reports which
  }
}

void Connection::read(void* dst, size_t n, const char* field, long index) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    asio::error_code ec;
    size_t got = sock_.read_some(asio::buffer(p, n), ec);
    if (got > 0) {
      p += got;
      n -= got;
      if (bytes_in_) bytes_in_->fetch_add(got, std::memory_order_relaxed);
      continue;
    }
    if (would_block(ec)) {
      wait(POLLIN, ("reading " + field_name(field, index)).c_str());
    } else if (ec == asio::error::interrupted) {
      continue;
    } else if (ec == asio::error::eof) {
      throw NetError(peer_, "peer closed the connection (reading " + field_name(field, index) + ")");
    } else {
      throw NetError(peer_, "read failed (" + field_name(field, index) + "): " + ec.message());
    }
  }
}

void Connection::write_all(const std::vector<Piece>& pieces) {
  std::vector<asio::const_buffer> bufs;  // the gather list: no byte is copied
  bufs.reserve(pieces.size());
  for (const Piece& p : pieces) {
    if (p.size) bufs.emplace_back(p.data, p.size);
  }
  while (!bufs.empty()) {
    asio::error_code ec;
    size_t n = asio::write(sock_, bufs, ec);  // sendmsg() over up to 64 buffers at a time
    if (bytes_out_) bytes_out_->fetch_add(n, std::memory_order_relaxed);
    size_t drop = 0;
    while (drop < bufs.size() && n >= bufs[drop].size()) n -= bufs[drop++].size();
    bufs.erase(bufs.begin(), bufs.begin() + static_cast<long>(drop));
    if (n > 0) bufs.front() += n;
    if (bufs.empty()) return;
    if (would_block(ec)) {
      wait(POLLOUT, "writing");
    } else if (ec && ec != asio::error::interrupted) {
      throw NetError(peer_, "write failed: " + ec.message());
    }
  }
}

void Connection::handshake(const std::string& secret, Protection protection, bool is_client) {
  const Hello mine = make_hello(protection);
  uint8_t out[kHelloBytes], in[kHelloBytes];
  encode_hello(mine, out);
  write_all({{out, sizeof out}});
  read(in, sizeof in, "hello", -1);
  Session s;
  try {
    s = make_session(secret, is_client, mine, parse_hello(in));
  } catch (const std::exception& e) {
    throw NetError(peer_, std::string("handshake: ") + e.what());
  }
  write_all({{s.my_confirmation.data(), s.my_confirmation.size()}});
  crypto::Mac theirs{};
  read(theirs.data(), theirs.size(), "confirmation", -1);
  if (!crypto::mac_equal(theirs.data(), s.their_confirmation.data(), theirs.size()))
    throw NetError(peer_, "handshake: key confirmation failed: the peer does not hold this job's secret (or the "
                          "hello was altered on the way)");
  session_ = std::move(s);
}

// Seals as it writes, kChunkBytes at a time, so each chunk goes to the socket while it is still in
// the cache: encrypted bytes pass through one staging buffer; authenticated-only tensor bytes are
// written straight from the tensor's memory after their chunk was authenticated; small pieces
// (header, meta, descriptors) are gathered so that they do not go out as tiny segments.
void Connection::send(OutFrame& f, const Message& m) {
  if (!has_session()) throw std::logic_error("Connection::send before the handshake");
  FrameCipher& tx = *session_.tx;
  if (!staging_) staging_ = std::make_unique<uint8_t[]>(kChunkBytes);
  uint8_t* buf = staging_.get();
  size_t used = 0;
  auto flush = [&] {
    if (used > 0) write_all({{buf, used}});
    used = 0;
  };
  tx.begin_seal(reinterpret_cast<const uint8_t*>(f.head.data()));
  std::memcpy(buf, f.head.data(), kHeaderBytes);
  used = kHeaderBytes;
  for_each_body_piece(f, m, [&](const uint8_t* p, size_t n) {
    while (n > 0) {
      const size_t k = std::min(n, kChunkBytes);
      if (!tx.encrypts() && k >= 64 * 1024) {  // a large authenticated piece: no copy
        flush();
        tx.update(p, nullptr, k);
        write_all({{p, k}});
      } else {
        if (used + k > kChunkBytes) flush();
        tx.update(p, buf + used, k);  // encrypts into the buffer; authenticated only: reads
        if (!tx.encrypts()) std::memcpy(buf + used, p, k);
        used += k;
      }
      p += k;
      n -= k;
    }
  });
  const auto tag = tx.finish_seal();
  if (used + tag.size() > kChunkBytes) flush();
  std::memcpy(buf + used, tag.data(), tag.size());
  used += tag.size();
  flush();
}

void Connection::send(const Message& m) {
  OutFrame f = prepare_frame(m);
  send(f, m);
}

Message Connection::receive(const Limits& limits, FrameHeader* header) {
  if (!has_session()) throw std::logic_error("Connection::receive before the handshake");
  return read_frame(*this, *session_.rx, limits, header);
}

bool Connection::stale() {
  if (!sock_.is_open()) return true;
  pollfd pfd{sock_.native_handle(), POLLIN, 0};
  int r = ::poll(&pfd, 1, 0);
  return r != 0;  // readable (EOF or unsolicited bytes), error, or poll failure
}

void Connection::close_gracefully(milliseconds linger) {
  asio::error_code ec;
  sock_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  Clock::time_point end = Clock::now() + linger;
  char scratch[64 * 1024];  // discarded bytes of a rejected frame
  for (;;) {
    size_t got = sock_.read_some(asio::buffer(scratch), ec);
    if (got > 0) continue;
    if (!would_block(ec)) break;  // EOF or error
    int ms = ms_until(end);
    if (ms == 0) break;
    pollfd fds[2] = {{sock_.native_handle(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int r = ::poll(fds, wake_fd_ >= 0 ? 2 : 1, ms);
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && wake_fd_ >= 0 && fds[1].revents != 0) break;
  }
  sock_.close(ec);
}

}  // namespace swarm::net::detail
