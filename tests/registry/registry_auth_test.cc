// Registry request authentication (registry/request_auth.h) against a real RegistryServer on
// loopback: requests sent as raw HTTP, signed or not, and what the registry's state is afterwards,
// read through an authenticated RegistryClient.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "registry/registry_client.h"
#include "registry/registry_server.h"
#include "registry/request_auth.h"
#include "registry/wire.h"
#include "tests/planner/peer_records.h"

namespace swarm::registry {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::worker_record;

constexpr const char* kSecret = "registry-auth-test-secret-0123456789";

int64_t unix_ms() {
  return static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string reason() const {
    const json j = json::parse(body, nullptr, false);
    return j.is_object() ? j.value("reason", "") : "";
  }
  std::string error() const {
    const json j = json::parse(body, nullptr, false);
    return j.is_object() ? j.value("error", "") : "<" + body + ">";
  }
};

// Reads one HTTP/1.1 reply (headers and a Content-Length body) from `fd`.
Reply read_reply(int fd) {
  Reply out;
  std::string in;
  char buf[4096];
  size_t header_end = std::string::npos, want = 0;
  while (header_end == std::string::npos || in.size() < header_end + 4 + want) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (header_end != std::string::npos || (header_end = in.find("\r\n\r\n")) == std::string::npos) continue;
    for (size_t at = in.find("\r\n") + 2; at < header_end;) {
      const size_t eol = in.find("\r\n", at);
      const std::string line = in.substr(at, eol - at);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = colon == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', colon + 1));
      at = eol + 2;
    }
    if (out.headers.count("content-length")) want = std::stoul(out.headers["content-length"]);
  }
  if (in.rfind("HTTP/1.1 ", 0) == 0) out.status = std::stoi(in.substr(9, 3));
  if (header_end != std::string::npos) out.body = in.substr(header_end + 4);
  return out;
}

// One request over a fresh connection, with `authorization` as its Authorization header ("" = none).
Reply exchange(int port, const std::string& method, const std::string& target, const std::string& body,
               const std::string& authorization) {
  std::string bytes = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!authorization.empty()) bytes += "Authorization: " + authorization + "\r\n";
  bytes += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Reply out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    out = read_reply(fd);
  }
  ::close(fd);
  return out;
}

// A request to the registry, and how it is signed.
struct Call {
  std::string method, target, body;
};

std::string sign(const Call& c, int64_t ts_ms, const std::string& secret = kSecret) {
  return auth::authorization(auth::registry_key(secret), c.method, c.target, c.body, ts_ms, auth::new_nonce());
}

class RegistryAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    RegistryOptions o;
    o.peer_expiry_seconds = 60;
    o.secret = kSecret;
    server_ = std::make_unique<RegistryServer>("127.0.0.1", 0, o);
    server_->start();
    client_ = std::make_unique<RegistryClient>(server_->url(), 5000ms, kSecret);
    client_->announce(worker_record("a", 0, 7001));
    client_->announce(worker_record("b", 0, 7002));
  }
  Reply send(const Call& c, const std::string& authorization) {
    return exchange(server_->port(), c.method, c.target, c.body, authorization);
  }
  // Everything the registry holds that the calls below could change, read with a signed client.
  std::string state() {
    json out;
    for (const auto& p : client_->peers())
      out["peers"][p.peer_id] = {p.stage, planner::to_string(p.state), p.step};
    out["stats"] = client_->stats();
    out["group"] = wire::to_json(client_->step_group(0, 7, 0));
    out["restored"] = wire::to_json(client_->step_group(0, 7, 1));
    return out.dump();
  }
  double metric(const std::string& sample) {
    const Reply r = exchange(server_->port(), "GET", "/metrics", "", "");
    const size_t at = r.body.find("\n" + sample + " ");
    return at == std::string::npos ? -1 : std::stod(r.body.substr(at + sample.size() + 2));
  }
  std::unique_ptr<RegistryServer> server_;
  std::unique_ptr<RegistryClient> client_;
};

// Every route that writes or reads the topology, with a request that would change or read it.
std::vector<Call> guarded_calls() {
  const json member = wire::to_json(planner::Member{"a", "127.0.0.1", 7001, 4});
  json join = member;
  join["gatherSeconds"] = 600;  // gathering all along: the group changes only when someone joins
  return {
      {"PUT", "/v1/peers/x", wire::to_json(worker_record("x", 1, 7009)).dump()},
      {"POST", "/v1/stages/0/steps/7/progress", R"({"peerId":"a","samples":4,"target":16})"},
      {"POST", "/v1/stages/0/steps/7/attempts/0/join", join.dump()},
      {"POST", "/v1/events", R"({"kind":"handoffs","count":3})"},
      {"POST", "/v1/failure", R"({"reason":"StageReset","stage":0,"step":7,"message":"m"})"},
      {"GET", "/v1/peers?role=worker", ""},
      {"GET", "/v1/stages/0/steps/7/attempts/0/group", ""},
      {"PUT", "/v1/stages/0/steps/7/attempts/1/group", json{{"members", json::array({member})}}.dump()},
      {"DELETE", "/v1/peers/b", ""},
  };
}

TEST_F(RegistryAuth, EveryGuardedRouteRefusesABadProofAndChangesNothing) {
  for (const Call& c : guarded_calls()) {
    SCOPED_TRACE(c.method + " " + c.target);
    const std::string before = state();
    Call tampered = c;
    tampered.body = c.body.empty() ? "{}" : c.body.substr(0, c.body.size() - 1) + " }";
    const struct {
      const char* what;
      Call sent;
      std::string authorization;
      const char* reason;
    } cases[] = {
        {"no header", c, "", "missing"},
        {"another secret", c, sign(c, unix_ms(), "not-the-job-secret"), "bad_signature"},
        {"body changed after signing", tampered, sign(c, unix_ms()), "bad_signature"},
        {"stale time stamp", c, sign(c, unix_ms() - 5 * 60'000), "timestamp"},
        {"time stamp from the future", c, sign(c, unix_ms() + 2 * 60'000), "timestamp"},
        {"not our scheme", c, "Bearer abc", "malformed"},
    };
    for (const auto& k : cases) {
      const Reply r = send(k.sent, k.authorization);
      EXPECT_EQ(r.status, 401) << k.what << ": " << r.body;
      EXPECT_EQ(r.reason(), k.reason) << k.what << ": " << r.body;
      EXPECT_EQ(r.error().rfind("authorization", 0), 0u) << k.what << ": " << r.body;
      EXPECT_EQ(r.headers.count("www-authenticate"), 1u) << k.what;
      EXPECT_EQ(state(), before) << k.what;
    }
    // The same request, signed, is served: the refusals above were for the proof alone.
    const Reply ok = send(c, sign(c, unix_ms()));
    EXPECT_EQ(ok.status, 200) << ok.body;
    if (c.method != "GET") EXPECT_NE(state(), before) << "a signed write changed nothing";
  }
  // Per route: one missing, two bad signatures, two timestamps, one malformed.
  const double routes = static_cast<double>(guarded_calls().size());
  EXPECT_EQ(routes, 9);
  EXPECT_EQ(metric("swarm_registry_auth_failures_total{reason=\"missing\"}"), routes);
  EXPECT_EQ(metric("swarm_registry_auth_failures_total{reason=\"bad_signature\"}"), 2 * routes);
  EXPECT_EQ(metric("swarm_registry_auth_failures_total{reason=\"timestamp\"}"), 2 * routes);
  EXPECT_EQ(metric("swarm_registry_auth_failures_total{reason=\"malformed\"}"), routes);
}

TEST_F(RegistryAuth, AReplayedRequestIsRefused) {
  const Call c{"POST", "/v1/events", R"({"kind":"handoffs","count":1})"};
  const std::string authorization = sign(c, unix_ms());
  EXPECT_EQ(send(c, authorization).status, 200);
  const Reply again = send(c, authorization);
  EXPECT_EQ(again.status, 401) << again.body;
  EXPECT_EQ(again.reason(), "replayed") << again.body;
  EXPECT_NE(again.error().find("authorization.nonce: already used"), std::string::npos) << again.body;
  EXPECT_EQ(client_->stats()["events"].value("handoffs", 0), 1) << "the replay was counted";
  // A fresh nonce is a new request.
  EXPECT_EQ(send(c, sign(c, unix_ms())).status, 200);
  EXPECT_EQ(client_->stats()["events"].value("handoffs", 0), 2);
  EXPECT_EQ(metric("swarm_registry_auth_failures_total{reason=\"replayed\"}"), 1);
}

TEST_F(RegistryAuth, HealthMetricsAndStatsStayOpen) {
  for (const char* path : {"/healthz", "/metrics", "/v1/stats"}) {
    const Reply r = exchange(server_->port(), "GET", path, "", "");
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  }
  // Open for reading only: another method on the same path needs a signature.
  EXPECT_EQ(exchange(server_->port(), "POST", "/v1/stats", "{}", "").status, 401);
  // A path that does not exist tells an unsigned request nothing.
  EXPECT_EQ(exchange(server_->port(), "GET", "/v1/nothing", "", "").status, 401);
  EXPECT_EQ(RegistryClient(server_->url(), 2000ms, "").stats()["events"], json::object());
  EXPECT_THROW(RegistryClient(server_->url(), 2000ms, "").peers(), RegistryError);
}

TEST_F(RegistryAuth, EveryReplyCarriesTheRegistrysClock) {
  for (const Reply& r : {exchange(server_->port(), "GET", "/healthz", "", ""),
                         exchange(server_->port(), "GET", "/v1/peers", "", ""),
                         exchange(server_->port(), "GET", "/v1/nothing", "", sign({"GET", "/v1/nothing", ""}, unix_ms()))}) {
    ASSERT_EQ(r.headers.count("x-swarm-time"), 1u) << r.status << " " << r.body;
    EXPECT_NEAR(std::stod(r.headers.at("x-swarm-time")), static_cast<double>(unix_ms()), 5000);
  }
}

TEST_F(RegistryAuth, AClientWhoseClockIsTenMinutesOffStillWorks) {
  for (int64_t skew : {600'000, -600'000}) {
    SCOPED_TRACE(skew);
    const double refused_before = metric("swarm_registry_auth_failures_total{reason=\"timestamp\"}");
    RegistryClient skewed(server_->url(), 5000ms, kSecret, [skew] { return unix_ms() + skew; });
    const std::string id = skew > 0 ? "ahead" : "behind";
    ASSERT_NO_THROW(skewed.announce(worker_record(id, 1, 7100)));
    EXPECT_NEAR(static_cast<double>(skewed.clock_offset_ms()), static_cast<double>(-skew), 5000);
    EXPECT_EQ(skewed.peers("worker", 1).size(), skew > 0 ? 1u : 2u);
    skewed.add_event("handoffs", 1);
    // Its first request was refused for its time stamp and signed again; none since.
    EXPECT_EQ(metric("swarm_registry_auth_failures_total{reason=\"timestamp\"}"), refused_before + 1);
  }
}

TEST_F(RegistryAuth, AClientWithAnotherSecretIsRefusedWithTheReason) {
  RegistryClient stranger(server_->url(), 5000ms, "another-jobs-secret");
  try {
    stranger.announce(worker_record("intruder", 0, 7200));
    FAIL() << "announced without the job secret";
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.status(), 401);
    EXPECT_NE(std::string(e.what()).find("authorization.sig: does not match"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RegistryClient(server_->url(), 5000ms, "").withdraw("a", false), RegistryError);
  EXPECT_EQ(client_->peers().size(), 2u);
}

}  // namespace
}  // namespace swarm::registry
