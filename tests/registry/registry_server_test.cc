// A real RegistryServer on loopback, driven by RegistryClient and by raw HTTP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

#include <nlohmann/json.hpp>

#include "registry/registry_client.h"
#include "registry/registry_server.h"
#include "tests/planner/peer_records.h"

namespace swarm::registry {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

using testing::worker_record;

struct RawReply {
  int status = 0;
  std::string body;
};

// Minimal HTTP/1.1 exchange over a fresh connection: sends `bytes`, reads one response.
RawReply raw_exchange(int port, const std::string& bytes, long timeout_s = 5) {
  RawReply out;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return out;
  }
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string in;
  char buf[4096];
  size_t header_end = std::string::npos;
  size_t want = std::string::npos;
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos && (header_end = in.find("\r\n\r\n")) != std::string::npos) {
      size_t cl = in.find("Content-Length: ");
      if (cl == std::string::npos) cl = in.find("content-length: ");
      if (cl != std::string::npos && cl < header_end) want = std::stoul(in.substr(cl + 16));
    }
    if (header_end != std::string::npos && want != std::string::npos &&
        in.size() >= header_end + 4 + want) {
      break;
    }
  }
  ::close(fd);
  if (in.rfind("HTTP/1.1 ", 0) == 0) out.status = std::stoi(in.substr(9, 3));
  if (header_end != std::string::npos) out.body = in.substr(header_end + 4);
  return out;
}

RawReply raw(int port, const std::string& method, const std::string& path,
             const std::string& body = "") {
  return raw_exchange(port, method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
                                body);
}

std::string error_of(const RawReply& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : "<" + r.body + ">";
}

class RegistryServerTest : public ::testing::Test {
 protected:
  // `fake_clock`: the registry reads time from now_ (set by the test) instead of the steady clock.
  void start(double expiry = 30, bool fake_clock = false) {
    std::function<double()> clock;
    if (fake_clock) clock = [this] { return now_.load(); };
    server_ = std::make_unique<RegistryServer>("127.0.0.1", 0, RegistryOptions{expiry, clock});
    server_->start();
    ASSERT_GT(server_->port(), 0);
    client_ = std::make_unique<RegistryClient>(server_->url(), 5000ms, "");
  }

  std::atomic<double> now_{1000.0};  // read by the server's threads
  std::unique_ptr<RegistryServer> server_;
  std::unique_ptr<RegistryClient> client_;
};

TEST_F(RegistryServerTest, AnnounceListFilterWithdraw) {
  start();
  EXPECT_TRUE(client_->healthy());
  planner::PeerRecord w = worker_record("w-b", 1, 7001);
  w.metrics_port = 9100;
  w.step = 3;
  w.queue_length = 4;
  w.samples_per_second = 12.5;
  client_->announce(w);
  client_->announce(worker_record("w-a", 0));
  client_->announce(worker_record("w-c", 1));
  planner::PeerRecord t;
  t.peer_id = "trainer-0";
  t.role = "trainer";
  t.host = "127.0.0.1";
  t.state = planner::PeerState::Serving;
  client_->announce(t);

  auto all = client_->peers();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].peer_id, "trainer-0");
  EXPECT_EQ(all[1].peer_id, "w-a");
  EXPECT_EQ(all[2].peer_id, "w-b");
  const auto& b = all[2];
  EXPECT_EQ(b.role, "worker");
  EXPECT_EQ(b.stage, 1);
  EXPECT_EQ(b.host, "127.0.0.1");
  EXPECT_EQ(b.port, 7001);
  EXPECT_EQ(b.metrics_port, 9100);
  EXPECT_EQ(b.state, planner::PeerState::Serving);
  EXPECT_EQ(b.step, 3);
  EXPECT_EQ(b.queue_length, 4);
  EXPECT_DOUBLE_EQ(b.samples_per_second, 12.5);
  EXPECT_NEAR(b.last_seen, static_cast<double>(std::time(nullptr)), 5.0);  // Unix time

  auto stage1 = client_->peers("worker", 1);
  ASSERT_EQ(stage1.size(), 2u);
  EXPECT_EQ(stage1[0].peer_id, "w-b");
  EXPECT_EQ(stage1[1].peer_id, "w-c");
  EXPECT_EQ(client_->peers("trainer").size(), 1u);
  EXPECT_EQ(client_->peers("", 0).size(), 1u);

  client_->withdraw("w-b", true);
  client_->withdraw("w-b", true);  // idempotent
  stage1 = client_->peers("worker", 1);
  ASSERT_EQ(stage1.size(), 1u);
  EXPECT_EQ(stage1[0].peer_id, "w-c");
}

TEST_F(RegistryServerTest, RecordsExpireWithoutHeartbeats) {
  // On the registry's injected clock: how late a request is served (a loaded machine) changes
  // nothing.
  start(0.5, /*fake_clock=*/true);
  client_->announce(worker_record("a", 0));
  client_->announce(worker_record("b", 0));
  now_ = now_ + 0.3;
  client_->announce(worker_record("b", 0));  // heartbeat
  now_ = now_ + 0.35;                         // a: 0.65 s silent; b: 0.35 s
  auto live = client_->peers();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].peer_id, "b");
  now_ = now_ + 0.1;  // b: 0.45 s, still live
  EXPECT_EQ(client_->peers().size(), 1u);
  now_ = now_ + 0.1;  // b: 0.55 s
  EXPECT_TRUE(client_->peers().empty());
}

TEST_F(RegistryServerTest, ProgressSumsAndClaims) {
  start();
  client_->announce(worker_record("a", 0));
  client_->announce(worker_record("b", 0));
  planner::ProgressView v = client_->report_progress(0, 5, "a", 40, 100, 40);
  EXPECT_EQ(v.step, 5);
  EXPECT_EQ(v.samples_total, 40);
  EXPECT_EQ(v.target, 100);
  EXPECT_FALSE(v.target_reached);
  v = client_->report_progress(0, 5, "b", 60, 100, 60);
  EXPECT_EQ(v.samples_total, 100);
  EXPECT_TRUE(v.target_reached);
  // b leaves: what it used stays in the step (its samples are in the stage's step either way).
  client_->withdraw("b", true);
  v = client_->report_progress(0, 5, "a", 41, 100, 41);
  EXPECT_EQ(v.samples_total, 101);
  EXPECT_TRUE(v.target_reached);
  // A claim: granted only as far as the step's target allows.
  planner::ClaimRequest c;
  c.done = 0;
  c.used = 0;
  c.want = 24;
  c.unit = 4;
  v = client_->claim(0, 6, "a", c, 16);
  EXPECT_EQ(v.granted, 16);
  EXPECT_TRUE(v.target_reached);
}

TEST_F(RegistryServerTest, ThreePeerStepWithConcurrentJoins) {
  start();
  const std::vector<std::string> ids = {"peer-c", "peer-a", "peer-b"};
  for (size_t i = 0; i < ids.size(); ++i) {
    client_->announce(worker_record(ids[i], 2, 7100 + static_cast<int>(i)));
  }
  // Step 0: a registry that just started and hears of a step past 0 takes it for a restart and
  // completes no group within its first expiry period (ARestartedRegistryWaitsForThePeersHeartbeats...).
  std::vector<planner::GroupView> seen(ids.size());
  std::vector<char> joined(ids.size(), 0);  // not vector<bool>: written concurrently
  std::vector<std::string> failures(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        RegistryClient c(server_->url(), 5000ms, "");  // each peer has its own client
        planner::Member m{ids[i], "127.0.0.1", 7100 + static_cast<int>(i), 10 * (int64_t(i) + 1)};
        joined[i] = c.join_step(2, 0, 0, m, 10.0);
        auto deadline = std::chrono::steady_clock::now() + 5s;
        do {
          seen[i] = c.step_group(2, 0, 0);
          if (seen[i].state == planner::GroupView::Ready) break;
          std::this_thread::sleep_for(10ms);
        } while (std::chrono::steady_clock::now() < deadline);
      } catch (const std::exception& e) {
        failures[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < ids.size(); ++i) {
    SCOPED_TRACE(ids[i]);
    EXPECT_EQ(failures[i], "");
    EXPECT_TRUE(joined[i]);
    ASSERT_EQ(seen[i].state, planner::GroupView::Ready);
    ASSERT_EQ(seen[i].members.size(), 3u);
    EXPECT_EQ(seen[i].members[0].peer_id, "peer-a");
    EXPECT_EQ(seen[i].members[1].peer_id, "peer-b");
    EXPECT_EQ(seen[i].members[2].peer_id, "peer-c");
    EXPECT_EQ(seen[i].members[0].port, 7101);
    EXPECT_EQ(seen[i].members[0].samples, 20);
    EXPECT_EQ(seen[i].leader, "peer-a");
  }
  // A latecomer is turned away from the closed group and gets its own next attempt.
  client_->announce(worker_record("peer-d", 2));
  planner::Member d{"peer-d", "127.0.0.1", 7200, 0};
  EXPECT_FALSE(client_->join_step(2, 0, 0, d, 10.0));
  EXPECT_TRUE(client_->join_step(2, 0, 1, d, 10.0));
  EXPECT_EQ(client_->step_group(2, 0, 1).state, planner::GroupView::Gathering);
  EXPECT_EQ(client_->step_group(2, 0, 7).state, planner::GroupView::Unknown);
}

TEST_F(RegistryServerTest, BadRequestsGet400WithTheFieldNamed) {
  start();
  const int port = server_->port();
  RawReply r = raw(port, "POST", "/v1/stages/0/steps/1/progress", "{oops");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "body: malformed JSON, got \"{oops\"");

  r = raw(port, "POST", "/v1/stages/0/steps/1/progress", R"({"peerId":"a","target":3})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "samples: is required, got nothing");

  r = raw(port, "PUT", "/v1/peers/w1", R"({"role":"worker","stage":0,"host":"h","port":"80"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "port: must be an integer in [0, 65535], got \"80\"");

  r = raw(port, "GET", "/v1/stages/first/steps/1/attempts/0/group");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "stage: must be an integer in [0, 1048576], got \"first\"");

  r = raw(port, "GET", "/v1/peers?role=worker&stage=zero");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "stage: must be an integer in [0, 1048576], got \"zero\"");

  r = raw(port, "GET", "/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_of(r), "path: no such resource, got \"/nope\"");

  r = raw(port, "PUT", "/v1/peers/w%2F1", R"({"role":"trainer","host":"h"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "peerId: must be 1-128 characters of [A-Za-z0-9._-], got \"w/1\"");

  // Garbage that is not HTTP at all, and a truncated request: the server survives both.
  raw_exchange(port, std::string("\x00\x01\x02garbage\r\n\r\n", 14), 1);
  raw_exchange(port, "POST /v1/peers/x HTTP/1.1\r\nContent-Length: 100\r\n\r\n{", 1);

  // The errors went through the client too, as RegistryError with status and field.
  try {
    client_->report_progress(0, 1, "a", 5, 0, 5);
    FAIL() << "expected RegistryError";
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.status(), 400);
    std::string what = e.what();
    EXPECT_NE(what.find("POST " + server_->url() + "/v1/stages/0/steps/1/progress"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("returned 400: target: must be"), std::string::npos) << what;
  }
  EXPECT_TRUE(client_->healthy());
  EXPECT_TRUE(client_->peers().empty());
}

TEST_F(RegistryServerTest, StartStop) {
  start();
  EXPECT_THROW(server_->start(), std::runtime_error);
  const int port = server_->port();
  // A second server on the same fixed port cannot bind.
  RegistryServer other("127.0.0.1", port, RegistryOptions{});
  EXPECT_THROW(other.start(), std::runtime_error);
  EXPECT_TRUE(client_->healthy());  // the failed bind left the first server serving
  server_->stop();
  server_->stop();
  EXPECT_FALSE(client_->healthy());
  // The same port can be served again right away.
  RegistryServer again("127.0.0.1", port, RegistryOptions{});
  again.start();
  EXPECT_TRUE(RegistryClient(again.url(), 2000ms, "").healthy());
}

TEST(RegistryServerPorts, PortHeldElsewhereFailsCleanly) {
  // A plain listening socket stands in for another process holding the port.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int held = ntohs(addr.sin_port);

  RegistryServer blocked("127.0.0.1", held, RegistryOptions{});
  EXPECT_THROW(blocked.start(), std::runtime_error);
  RegistryServer fine("127.0.0.1", 0, RegistryOptions{});
  fine.start();
  EXPECT_NE(fine.port(), held);
  EXPECT_TRUE(RegistryClient(fine.url(), 2000ms, "").healthy());
  ::close(fd);
  EXPECT_THROW(RegistryServer("127.0.0.1", 70000, RegistryOptions{}), std::invalid_argument);
  RegistryServer unresolvable("no-such-host.invalid", 0, RegistryOptions{});
  EXPECT_THROW(unresolvable.start(), std::runtime_error);
}

TEST(RegistryClientTest, ClosedPortThrowsQuickly) {
  int port = 0;
  {
    // Find a port nobody listens on.
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  RegistryClient c(url, 3000ms, "");
  auto t0 = std::chrono::steady_clock::now();
  try {
    c.peers("worker", 0);
    FAIL() << "expected RegistryError";
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_NE(std::string(e.what()).find("GET " + url + "/v1/peers?role=worker&stage=0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  EXPECT_THROW(c.announce(worker_record("a", 0)), RegistryError);
  EXPECT_FALSE(c.healthy());
  EXPECT_THROW(RegistryClient("not a url", 1000ms, ""), RegistryError);
}

}  // namespace
}  // namespace swarm::registry
