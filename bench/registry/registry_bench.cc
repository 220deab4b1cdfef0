// registry_bench: a registry (`swarm registry`, started by bench/registry/registry_load.sh on one
// core) under the load of many simulated peers. Each peer, once a second: a heartbeat
// (PUT /v1/peers/{id}, a worker record) and a progress report for its stage's current step
// (POST /v1/stages/{s}/steps/{r}/progress; the step advances every `step_seconds`); with
// --peer-lists also the list of its stage's peers (GET /v1/peers?role=worker&stage=s, what a
// worker's heartbeat reads to find out whether it fell behind).
//
// Open loop: every request has a due time (peers are spread evenly over the second); latency is
// measured from the due time to the end of the reply, so queueing in the registry counts. Requests
// go over `connections` keep-alive HTTP/1.1 connections (one thread each). Prints p50/p90/p99/max
// latency, requests/s, errors, and the registry process's CPU (utime + stime from /proc, in % of
// one core) over the measured window. Asserts nothing. Every request is signed with the job
// secret from SWARM_JOB_SECRET (registry/request_auth.h), as the registry requires.
//
//   registry_bench --port P --registry-pid PID [--peers 1000] [--seconds 30] [--connections 32]
//                  [--stages 4] [--step-seconds 2] [--peer-lists]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "registry/request_auth.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  int registry_pid = 0;
  int peers = 1000;
  double seconds = 30;
  int connections = 32;
  int stages = 4;
  double step_seconds = 2;
  bool peer_lists = false;
};

double cpu_seconds(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  std::vector<std::string> fields;
  while (rest >> field) fields.push_back(field);
  // After "(comm) ": state is field 3 of the man page, utime 14 and stime 15.
  if (fields.size() < 13) return -1;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
}

// The registry key of $SWARM_JOB_SECRET (the registry's secret: registry_load.sh sets it for both).
const std::string& registry_key() {
  static const std::string key = [] {
    const char* secret = std::getenv("SWARM_JOB_SECRET");
    if (secret == nullptr || *secret == '\0') {
      std::fprintf(stderr, "registry_bench: SWARM_JOB_SECRET is not set (the registry's job secret)\n");
      std::exit(2);
    }
    return swarm::registry::auth::registry_key(secret);
  }();
  return key;
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Connection {
 public:
  explicit Connection(int port) : port_(port) { open(); }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Sends one request and reads its reply; returns the HTTP status (0 on a transport error, after
  // which the connection is reopened).
  int request(const std::string& method, const std::string& path, const std::string& body) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    req += "Authorization: " +
           swarm::registry::auth::authorization(registry_key(), method, path, body, unix_ms(),
                                                swarm::registry::auth::new_nonce()) +
           "\r\n";
    if (!body.empty()) req += "Content-Type: application/json\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (!send_all(req)) return reopen();
    std::string head;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return reopen();
    head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    int status = 0;
    if (std::sscanf(head.c_str(), "HTTP/1.%*d %d", &status) != 1) return reopen();
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      while (true) {  // chunks: "<hex size>\r\n<data>\r\n", the last of size 0
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos)
          if (!fill()) return reopen();
        const size_t size = std::strtoul(buf_.c_str(), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2)
          if (!fill()) return reopen();
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) return status;
      }
    }
    size_t length = 0;
    const size_t cl = lower.find("content-length:");
    if (cl != std::string::npos) length = std::strtoul(lower.c_str() + cl + 15, nullptr, 10);
    while (buf_.size() < length)
      if (!fill()) return reopen();
    buf_.erase(0, length);
    return status;
  }

 private:
  void open() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  int reopen() {
    if (fd_ >= 0) ::close(fd_);
    buf_.clear();
    open();
    return 0;
  }
  bool send_all(const std::string& s) {
    if (fd_ < 0) return false;
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool fill() {
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int port_;
  int fd_ = -1;
  std::string buf_;
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--port") o.port = std::stoi(next());
    else if (a == "--registry-pid") o.registry_pid = std::stoi(next());
    else if (a == "--peers") o.peers = std::stoi(next());
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--connections") o.connections = std::stoi(next());
    else if (a == "--stages") o.stages = std::stoi(next());
    else if (a == "--step-seconds") o.step_seconds = std::stod(next());
    else if (a == "--peer-lists") o.peer_lists = true;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.port <= 0) {
    std::fprintf(stderr, "usage: registry_bench --port P --registry-pid PID [--peers N] [--seconds S] ...\n");
    return 2;
  }

  // Warm-up: every peer registers once, so the measured window starts with the full table.
  {
    Connection c(o.port);
    for (int p = 0; p < o.peers; ++p) {
      const std::string id = "sim-" + std::to_string(p);
      const std::string body = "{\"role\":\"worker\",\"stage\":" + std::to_string(p % o.stages) +
                               ",\"host\":\"10.0.0.1\",\"port\":7000,\"metricsPort\":9000,\"state\":\"serving\","
                               "\"step\":0,\"queueLength\":0,\"samplesPerSecond\":10}";
      c.request("PUT", "/v1/peers/" + id, body);
    }
  }

  const auto t0 = Clock::now() + std::chrono::milliseconds(200);
  const double cpu0 = o.registry_pid > 0 ? cpu_seconds(o.registry_pid) : -1;
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<int64_t> errors{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.connections; ++t) {
    threads.emplace_back([&, t] {
      Connection c(o.port);
      std::vector<double> mine;
      // This connection's peers' due times, as offsets within each second.
      std::vector<std::pair<double, int>> slots;
      for (int p = t; p < o.peers; p += o.connections) slots.push_back({static_cast<double>(p) / o.peers, p});
      for (int second = 0; second < static_cast<int>(o.seconds); ++second) {
        for (const auto& [offset, p] : slots) {
          const auto due = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(second + offset));
          std::this_thread::sleep_until(due);
          const int stage = p % o.stages;
          const int64_t step = static_cast<int64_t>((second + offset) / o.step_seconds);
          const std::string id = "sim-" + std::to_string(p);
          const std::string hb = "{\"role\":\"worker\",\"stage\":" + std::to_string(stage) +
                                 ",\"host\":\"10.0.0.1\",\"port\":7000,\"metricsPort\":9000,\"state\":\"serving\","
                                 "\"step\":" + std::to_string(step) +
                                 ",\"queueLength\":1,\"samplesPerSecond\":10}";
          const std::string progress = "{\"peerId\":\"" + id + "\",\"samples\":" + std::to_string(second % 8) +
                                       ",\"target\":100000,\"admitted\":" + std::to_string(second % 8) + "}";
          auto one = [&](const std::string& m, const std::string& path, const std::string& body) {
            const int status = c.request(m, path, body);
            const double lat = std::chrono::duration<double>(Clock::now() - due).count();
            mine.push_back(lat);
            if (status < 200 || status >= 300) ++errors;
            ++done;
          };
          one("PUT", "/v1/peers/" + id, hb);
          one("POST", "/v1/stages/" + std::to_string(stage) + "/steps/" + std::to_string(step) + "/progress",
              progress);
          if (o.peer_lists) one("GET", "/v1/peers?role=worker&stage=" + std::to_string(stage), "");
        }
      }
      std::lock_guard<std::mutex> lk(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu1 = o.registry_pid > 0 ? cpu_seconds(o.registry_pid) : -1;
  std::vector<double> v = latencies;
  std::printf("registry_bench: %d peers, %d requests per peer-second%s, %.0f s, %d connections\n", o.peers,
              o.peer_lists ? 3 : 2, o.peer_lists ? " (heartbeat, progress, peer list)" : " (heartbeat, progress)",
              o.seconds, o.connections);
  std::printf("  requests      %lld (%.0f/s), errors %lld\n", static_cast<long long>(done.load()),
              static_cast<double>(done.load()) / wall, static_cast<long long>(errors.load()));
  std::printf("  latency ms    p50 %.2f  p90 %.2f  p99 %.2f  max %.2f   (from the due time: queueing included)\n",
              1e3 * percentile(v, 0.50), 1e3 * percentile(v, 0.90), 1e3 * percentile(v, 0.99),
              v.empty() ? 0.0 : 1e3 * *std::max_element(v.begin(), v.end()));
  if (cpu0 >= 0 && cpu1 >= 0)
    std::printf("  registry CPU  %.1f %% of one core (%.1f s over %.1f s)\n", 100 * (cpu1 - cpu0) / wall, cpu1 - cpu0,
                wall);
  return 0;
}
