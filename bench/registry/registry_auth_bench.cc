// registry_auth_bench: what request authentication (registry/request_auth.h) costs the registry.
// Two RegistryServers in this process on loopback, one with the job secret and one without; the
// same closed loop against each in turn: `clients` threads, each its own RegistryClient (signing
// with the secret, or not), each repeating what a worker's heartbeat does — PUT its record, POST
// progress for its stage's step, GET its stage's peer list — as fast as replies come. Rounds
// alternate off/on so that load from elsewhere on the machine falls on both alike. Prints
// requests/s for each, and on/off. Asserts nothing.
//
//   registry_auth_bench [--clients 8] [--seconds 5] [--rounds 3] [--peers 64]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "registry/registry_client.h"
#include "registry/registry_server.h"

namespace {

using namespace std::chrono_literals;
using swarm::registry::RegistryClient;
using swarm::registry::RegistryOptions;
using swarm::registry::RegistryServer;

constexpr const char* kSecret = "registry-auth-bench-secret-0123456789";

struct Options {
  int clients = 8;
  double seconds = 5;
  int rounds = 3;
  int peers = 64;  // registered before the measured rounds: the peer lists have this many
};

swarm::planner::PeerRecord record(const std::string& id, int stage, int64_t step) {
  swarm::planner::PeerRecord r;
  r.peer_id = id;
  r.role = "worker";
  r.stage = stage;
  r.host = "10.0.0.1";
  r.port = 7000;
  r.state = swarm::planner::PeerState::Serving;
  r.step = step;
  r.samples_per_second = 10;
  return r;
}

// Requests per second of `clients` closed loops for `seconds` against `url`; errors counted.
double measure(const std::string& url, const std::string& secret, const Options& o, int64_t& errors) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0}, failed{0};
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      RegistryClient client(url, 5000ms, secret);
      const std::string id = "bench-" + std::to_string(c);
      const int stage = c % 4;
      for (int64_t step = 0; !stop.load(); ++step) {
        try {
          client.announce(record(id, stage, step));
          client.report_progress(stage, step, id, 4, 1'000'000, 4);
          client.peers("worker", stage);
          done += 3;
        } catch (const std::exception& e) {
          if (failed++ == 0) std::fprintf(stderr, "registry_auth_bench: %s\n", e.what());
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  errors += failed.load();
  return static_cast<double>(done.load()) / wall;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "registry_auth_bench: %s needs a value\n", a.c_str());
      std::exit(2);
    }
    const std::string v = argv[++i];
    try {
      if (a == "--clients") o.clients = std::stoi(v);
      else if (a == "--seconds") o.seconds = std::stod(v);
      else if (a == "--rounds") o.rounds = std::stoi(v);
      else if (a == "--peers") o.peers = std::stoi(v);
      else throw std::invalid_argument("unknown option");
    } catch (const std::exception&) {
      std::fprintf(stderr, "registry_auth_bench: bad option %s %s\n", a.c_str(), v.c_str());
      std::exit(2);
    }
  }
  if (o.clients < 1 || o.clients > 1024 || !(o.seconds > 0) || o.rounds < 1 || o.peers < 0) {
    std::fprintf(stderr, "registry_auth_bench: need --clients 1..1024, --seconds > 0, --rounds >= 1, --peers >= 0\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  RegistryOptions off_options, on_options;
  off_options.peer_expiry_seconds = on_options.peer_expiry_seconds = 600;
  on_options.secret = kSecret;
  RegistryServer off("127.0.0.1", 0, off_options), on("127.0.0.1", 0, on_options);
  off.start();
  on.start();
  for (auto [server, secret] : {std::pair<RegistryServer*, std::string>{&off, ""}, {&on, kSecret}}) {
    RegistryClient c(server->url(), 5000ms, secret);
    for (int p = 0; p < o.peers; ++p) c.announce(record("sim-" + std::to_string(p), p % 4, 0));
  }
  std::string load;
  std::getline(std::ifstream("/proc/loadavg"), load);
  std::printf("registry_auth_bench: %d clients, closed loop (heartbeat, progress, peer list), %d rounds of %.0f s "
              "each way, %d peers, %u cores, load average %s\n",
              o.clients, o.rounds, o.seconds, o.peers, std::thread::hardware_concurrency(),
              load.substr(0, load.find(' ')).c_str());
  double sum_off = 0, sum_on = 0;
  int64_t errors = 0;
  for (int r = 0; r < o.rounds; ++r) {
    const double a = measure(off.url(), "", o, errors);
    const double b = measure(on.url(), kSecret, o, errors);
    std::printf("  round %d   off %8.0f req/s   on %8.0f req/s   on/off %.3f\n", r + 1, a, b, b / a);
    sum_off += a;
    sum_on += b;
  }
  std::printf("  mean      off %8.0f req/s   on %8.0f req/s   on/off %.3f   errors %lld\n", sum_off / o.rounds,
              sum_on / o.rounds, sum_on / sum_off, static_cast<long long>(errors));
  on.stop();
  off.stop();
  return errors == 0 ? 0 : 1;
}
