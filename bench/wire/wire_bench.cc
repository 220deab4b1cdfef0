// wire_bench: throughput and latency of swarm_net over TCP.
//
// By default it forks an echo Server (127.0.0.1, ephemeral port) into a child process, then, from
// the parent, sends a float32 tensor (4 MiB by default) and receives it back --iters times, and
// times --small-iters Ping calls with no tensors.
//
// Every frame is authenticated (AES-256-GCM over all its bytes); with --transport encrypted it is
// also encrypted (worker/net/session.h). Both ends of a run use the same transport.
//
// How throughput is counted: tensor payload bytes only (frame headers, descriptors and tags not
// included), both directions: iters x tensor_bytes x 2 / wall time of the timed loop. Request and
// reply are sequential (request fully sent before the reply starts), so this is the rate the link
// actually moved payload while busy, comparable to a one-way iperf3 stream.
// MB = 10^6 bytes.
//
//   wire_bench [--iters N] [--mib M] [--small-iters K] [--buf BYTES] [--warmup W]
//              [--transport authenticated|encrypted]
//   wire_bench --serve PORT [--buf BYTES]          run only the echo server (Ctrl-C to stop)
//   wire_bench --connect HOST:PORT [...]           benchmark against a running --serve
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "worker/net/client.h"
#include "worker/net/server.h"

namespace net = swarm::net;
using Clock = std::chrono::steady_clock;

namespace {

const char* kSecret = "wire-bench-secret";

struct Args {
  int iters = 200;
  double mib = 4;
  int small_iters = 5000;
  int warmup = 10;
  int buf = 4 << 20;
  int serve_port = -1;
  std::string connect;  // host:port
  net::Protection protection = net::Protection::Authenticated;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: wire_bench [--iters N] [--mib M] [--small-iters K] [--warmup W] [--buf BYTES]\n"
               "                  [--transport authenticated|encrypted]\n"
               "       wire_bench --serve PORT [--buf BYTES]\n"
               "       wire_bench --connect HOST:PORT [--iters N] ...\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (k == "--iters") a.iters = std::stoi(v);
    else if (k == "--mib") a.mib = std::stod(v);
    else if (k == "--small-iters") a.small_iters = std::stoi(v);
    else if (k == "--warmup") a.warmup = std::stoi(v);
    else if (k == "--buf") a.buf = std::stoi(v);
    else if (k == "--serve") a.serve_port = std::stoi(v);
    else if (k == "--connect") a.connect = v;
    else if (k == "--transport") a.protection = net::parse_protection(v);
    else usage();
  }
  return a;
}

net::Message echo(net::Message&& m) {
  m.type = static_cast<uint16_t>(m.type + 1);  // Forward -> ForwardReply, Ping -> Pong
  return std::move(m);                          // tensors go back from the buffers they came in
}

std::unique_ptr<net::Server> make_server(const std::string& host, uint16_t port, int buf, net::Protection p) {
  net::ServerOptions opts;
  opts.socket_buffer_bytes = buf;
  opts.protection = p;
  auto s = std::make_unique<net::Server>(host, port, kSecret, echo, opts);
  s->start();
  return s;
}

// Forks the echo server; returns its port. The child exits when `*keepalive_fd` is closed.
uint16_t fork_server(int buf, net::Protection p, pid_t* child, int* keepalive_fd) {
  int port_pipe[2], life_pipe[2];
  if (::pipe(port_pipe) != 0 || ::pipe(life_pipe) != 0) std::perror("pipe"), std::exit(1);
  pid_t pid = ::fork();  // before any thread exists in this process
  if (pid < 0) std::perror("fork"), std::exit(1);
  if (pid == 0) {
    ::close(port_pipe[0]);
    ::close(life_pipe[1]);
    auto server = make_server("127.0.0.1", 0, buf, p);
    uint16_t port = server->port();
    if (::write(port_pipe[1], &port, sizeof port) != sizeof port) ::_exit(1);
    char c;
    while (::read(life_pipe[0], &c, 1) > 0) {
    }  // EOF: the parent is done (or died)
    server->stop();
    ::_exit(0);
  }
  ::close(port_pipe[1]);
  ::close(life_pipe[0]);
  uint16_t port = 0;
  if (::read(port_pipe[0], &port, sizeof port) != sizeof port) {
    std::fprintf(stderr, "wire_bench: the server child did not start\n");
    std::exit(1);
  }
  ::close(port_pipe[0]);
  *child = pid;
  *keepalive_fd = life_pipe[1];
  return port;
}

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

int run_client(const Args& a, const std::string& host, uint16_t port, const char* where) {
  net::ClientOptions copts;
  copts.socket_buffer_bytes = a.buf;
  copts.protection = a.protection;
  net::Client client(host, port, kSecret, copts);
  size_t n = static_cast<size_t>(a.mib * 1024 * 1024 / 4);
  auto buf = std::make_shared<std::vector<float>>(n);
  for (size_t i = 0; i < n; ++i) (*buf)[i] = static_cast<float>(i % 1000) * 0.5f;
  net::Message req;
  req.type = net::Forward;
  req.meta = R"({"bench":"wire"})";
  req.tensors.push_back(net::WireTensor::view(net::DType::Float32, {static_cast<int64_t>(n)}, buf->data(), buf));
  const size_t bytes = req.tensors[0].nbytes;
  const auto timeout = std::chrono::seconds(30);

  for (int i = 0; i < a.warmup; ++i) {
    net::Message rep = client.call(req, timeout);
    if (i == 0 && (rep.tensors.size() != 1 || rep.tensors[0].nbytes != bytes ||
                   std::memcmp(rep.tensors[0].data, buf->data(), bytes) != 0)) {
      std::fprintf(stderr, "wire_bench: echo mismatch\n");
      return 1;
    }
  }
  net::ClientStats before = client.stats();
  auto t0 = Clock::now();
  for (int i = 0; i < a.iters; ++i) client.call(req, timeout);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  net::ClientStats after = client.stats();
  double payload = static_cast<double>(bytes) * 2.0 * a.iters;
  double wire = static_cast<double>((after.bytes_in - before.bytes_in) + (after.bytes_out - before.bytes_out));

  net::Message ping;
  ping.type = net::Ping;
  for (int i = 0; i < 100; ++i) client.call(ping, timeout);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(a.small_iters));
  for (int i = 0; i < a.small_iters; ++i) {
    auto s = Clock::now();
    client.call(ping, timeout);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }

  std::printf("wire_bench: %.2f MiB float32 tensor echoed %d times, %s, transport %s\n", bytes / 1048576.0, a.iters,
              where, net::protection_name(a.protection));
  std::printf("  socket buffers        : %s\n", a.buf > 0 ? (std::to_string(a.buf) + " bytes (SO_SNDBUF/SO_RCVBUF)").c_str() : "kernel default (autotuning)");
  std::printf("  timed loop            : %.3f s, %.3f ms per round trip\n", secs, secs * 1e3 / a.iters);
  std::printf("  throughput, both ways : %.1f MB/s  = %d x %zu tensor bytes x 2 directions / wall time (MB = 1e6 B)\n",
              payload / secs / 1e6, a.iters, bytes);
  std::printf("  per direction         : %.1f MB/s  = half of the above (request and reply are sequential,\n"
              "                          so each direction moved its bytes at ~the both-ways rate while active)\n",
              payload / 2 / secs / 1e6);
  std::printf("  incl. frame overhead  : %.1f MB/s  (all socket bytes counted by Client stats)\n", wire / secs / 1e6);
  std::printf("  small request latency : Ping, no tensors, %d calls: p50 %.1f us, p99 %.1f us\n", a.small_iters,
              pct(us, 50), pct(us, 99));
  std::printf("WIRE_BYTES_PER_SEC=%.0f\n", payload / secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.iters <= 0 || a.mib <= 0 || a.small_iters <= 0) usage();
  try {
    if (a.serve_port >= 0) {
      auto server = make_server("0.0.0.0", static_cast<uint16_t>(a.serve_port), a.buf, a.protection);
      std::printf("wire_bench: echo server on port %u\n", server->port());
      std::fflush(stdout);
      ::pause();
      return 0;
    }
    if (!a.connect.empty()) {
      size_t colon = a.connect.rfind(':');
      if (colon == std::string::npos) usage();
      return run_client(a, a.connect.substr(0, colon), static_cast<uint16_t>(std::stoi(a.connect.substr(colon + 1))),
                        ("to " + a.connect).c_str());
    }
    pid_t child = -1;
    int keepalive = -1;
    uint16_t port = fork_server(a.buf, a.protection, &child, &keepalive);
    int rc = run_client(a, "127.0.0.1", port, "loopback, server in a child process");
    ::close(keepalive);
    int status = 0;
    ::waitpid(child, &status, 0);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wire_bench: %s\n", e.what());
    return 1;
  }
}
