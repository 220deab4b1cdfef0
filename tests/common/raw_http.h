// Raw HTTP/1.1 over loopback TCP for tests of the project's HTTP servers: bytes as a client would
// (or would not) send them, and one reply read back with a deadline. Header-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>

namespace swarm::testing {

// A connected loopback socket, closed on destruction; fd() < 0 when the connect failed.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  int fd() const { return fd_; }

  // Sends all of `bytes`; false once the server closed or reset the connection.
  bool send(const std::string& bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads up to `n` bytes that arrive before `deadline`: "" on timeout, EOF or reset.
  std::string recv_some(std::chrono::steady_clock::time_point deadline, size_t n = 65536) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    std::string buf(n, '\0');
    const ssize_t got = ::recv(fd_, buf.data(), n, 0);
    if (got <= 0) return "";
    buf.resize(static_cast<size_t>(got));
    return buf;
  }

  // Whether the server closed the connection (EOF or reset) before `deadline`, discarding what
  // it sent first.
  bool closed_by(std::chrono::steady_clock::time_point deadline) {
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
};

struct RawReply {
  int status = 0;  // 0: no complete reply before the deadline
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  // The header named `lower_name`, "" when absent.
  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

// Reads one reply (status line, headers, a Content-Length body) from `c`, skipping interim 1xx
// replies unless `keep_interim`. Bytes past it stay in `leftover` for the next call.
inline RawReply read_reply(RawConnection& c, std::chrono::steady_clock::time_point deadline, std::string& leftover,
                           bool keep_interim = false) {
  std::string in = std::move(leftover);
  leftover.clear();
  for (;;) {
    const size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      RawReply r;
      if (in.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(in.c_str() + 9);
      for (size_t at = in.find("\r\n") + 2; at < end;) {
        const size_t eol = in.find("\r\n", at);
        const std::string line = in.substr(at, eol - at);
        const size_t colon = line.find(':');
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        const size_t v = colon == std::string::npos ? line.size() : line.find_first_not_of(' ', colon + 1);
        r.headers[name] = v == std::string::npos ? "" : line.substr(v);
        at = eol + 2;
      }
      if (r.status >= 100 && r.status < 200 && !keep_interim) {
        in.erase(0, end + 4);
        continue;
      }
      const size_t want = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
      while (in.size() < end + 4 + want) {
        const std::string more = c.recv_some(deadline);
        if (more.empty()) return RawReply{};
        in += more;
      }
      r.body = in.substr(end + 4, want);
      leftover = in.substr(end + 4 + want);
      return r;
    }
    const std::string more = c.recv_some(deadline);
    if (more.empty()) return RawReply{};
    in += more;
  }
}

inline RawReply read_reply(RawConnection& c, std::chrono::steady_clock::time_point deadline) {
  std::string leftover;
  return read_reply(c, deadline, leftover);
}

// The peak resident set of `pid` in kB (VmHWM of /proc/PID/status); -1 when unreadable.
inline long peak_rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// What upload() saw: the reply, how long it took, how much had been sent by then.
struct Upload {
  RawReply reply;
  double seconds = 0;
  size_t sent_bytes = 0;
};

// `method` `path` with a body of `total` bytes, chunked or with its Content-Length, sent from a
// thread (64 KiB made once and sent again and again: nothing the size of the body exists) while
// this one waits up to `timeout` for the reply; the upload stops once the reply came.
inline Upload upload(int port, const std::string& method, const std::string& path, size_t total, bool chunked,
                     std::chrono::seconds timeout = std::chrono::seconds(120)) {
  RawConnection c(port);
  std::string head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  head += chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "Content-Length: " + std::to_string(total) + "\r\n\r\n";
  Upload u;
  if (!c.send(head)) return u;
  std::atomic<bool> answered{false};
  std::atomic<size_t> sent{0};
  std::thread sender([&] {
    const std::string data(64 << 10, 'a');
    const std::string piece = chunked ? "10000\r\n" + data + "\r\n" : data;
    while (sent < total && !answered && c.send(piece)) sent += data.size();
    if (chunked && sent >= total) c.send("0\r\n\r\n");
  });
  const auto t0 = std::chrono::steady_clock::now();
  u.reply = read_reply(c, t0 + timeout);
  u.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  u.sent_bytes = sent;
  answered = true;
  ::shutdown(c.fd(), SHUT_RDWR);  // unblocks a send stuck on a full socket buffer
  sender.join();
  return u;
}

}  // namespace swarm::testing
