// Client and Server over loopback TCP: round trips, errors, malformed peers, timeouts, limits.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "worker/net/client.h"
#include "worker/net/server.h"

namespace net = swarm::net;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kSecret = "s3cret";

net::Message echo(net::Message&& m) {
  m.type = static_cast<uint16_t>(m.type + 1);
  return std::move(m);
}

net::Message float_request(size_t n, float base) {
  auto buf = std::make_shared<std::vector<float>>(n);
  for (size_t i = 0; i < n; ++i) (*buf)[i] = base + static_cast<float>(i);
  net::Message m;
  m.type = net::Forward;
  m.meta = R"({"k":1})";
  m.tensors.push_back(net::WireTensor::view(net::DType::Float32, {static_cast<int64_t>(n)}, buf->data(), buf));
  return m;
}

// A plain TCP socket for misbehaving peers. With `hello`, it does the session handshake (session.h)
// by hand, so it can send frames of its own making; frame() and reply() are the connection's first
// frame each way.
struct RawSocket {
  int fd = -1;
  net::Hello mine, theirs;
  explicit RawSocket(uint16_t port, bool hello = false, net::Protection p = net::Protection::Authenticated) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "connect";
    if (hello) handshake(p);
  }
  ~RawSocket() { ::close(fd); }
  void send(const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }
  void handshake(net::Protection p) {
    mine = net::make_hello(p);
    uint8_t b[net::kHelloBytes];
    net::encode_hello(mine, b);
    send(std::string(reinterpret_cast<char*>(b), sizeof b));
    std::string got;
    while (got.size() < net::kHelloBytes) {
      char c[net::kHelloBytes];
      ssize_t n = ::recv(fd, c, net::kHelloBytes - got.size(), 0);
      if (n <= 0) {
        ADD_FAILURE() << "no hello from the server";
        return;
      }
      got.append(c, static_cast<size_t>(n));
    }
    theirs = net::parse_hello(reinterpret_cast<const uint8_t*>(got.data()));
    auto s = net::make_session(kSecret, true, mine, theirs);
    send(std::string(s.my_confirmation.begin(), s.my_confirmation.end()));
    char c[32];
    size_t n = 0;
    while (n < sizeof c) {
      ssize_t r = ::recv(fd, c + n, sizeof c - n, 0);
      if (r <= 0) break;
      n += static_cast<size_t>(r);
    }
    EXPECT_EQ(std::string(c, n), std::string(s.their_confirmation.begin(), s.their_confirmation.end()));
  }
  std::string frame(const net::Message& m, const std::string& secret = kSecret) {
    auto s = net::make_session(secret, true, mine, theirs);
    return net::encode_frame(m, *s.tx);
  }
  net::Message reply(const std::string& bytes) {
    auto s = net::make_session(kSecret, true, mine, theirs);
    return net::decode_frame(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), *s.rx, {});
  }
  // Everything until EOF, or what came before `limit`.
  std::string read_to_eof(std::chrono::milliseconds limit, bool* eof = nullptr) {
    std::string out;
    auto end = Clock::now() + limit;
    if (eof) *eof = false;
    for (;;) {
      int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      if (ms <= 0) return out;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, ms) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        if (eof) *eof = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }
};

// A listener that accepts connections and never answers.
struct SilentListener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  SilentListener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);  // the kernel completes handshakes; nobody ever reads
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~SilentListener() { ::close(fd); }
};

}  // namespace

TEST(Net, EmptySecretIsRefused) {
  EXPECT_THROW(net::Client("127.0.0.1", 1, ""), std::invalid_argument);
  EXPECT_THROW(net::Server("127.0.0.1", 0, "", echo), std::invalid_argument);
}

TEST(Net, RoundTripAndStats) {
  net::Server server("127.0.0.1", 0, kSecret, echo);
  ASSERT_NE(server.port(), 0);
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  for (int i = 0; i < 5; ++i) {
    net::Message req = float_request(1 << 20, static_cast<float>(i));  // 4 MiB
    net::Message rep = client.call(req, 10s);
    EXPECT_EQ(rep.type, net::ForwardReply);
    EXPECT_EQ(rep.meta, req.meta);
    ASSERT_EQ(rep.tensors.size(), 1u);
    ASSERT_EQ(rep.tensors[0].nbytes, req.tensors[0].nbytes);
    EXPECT_EQ(std::memcmp(rep.tensors[0].data, req.tensors[0].data, rep.tensors[0].nbytes), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(rep.tensors[0].data) % 64, 0u);
  }
  net::Message ping;
  ping.type = net::Ping;
  EXPECT_EQ(client.call(ping, 5s).type, net::Pong);
  net::ClientStats cs = client.stats();
  EXPECT_EQ(cs.calls, 6u);
  EXPECT_EQ(cs.connects, 1u);  // pooled and reused
  EXPECT_GT(cs.bytes_out, 5u * 4 * 1024 * 1024);
  server.stop();
  net::ServerStats ss = server.stats();
  EXPECT_EQ(ss.frames_in, 6u);
  EXPECT_EQ(ss.frames_out, 6u);
  EXPECT_EQ(ss.bytes_in, cs.bytes_out);
  EXPECT_EQ(ss.bytes_out, cs.bytes_in);
}

TEST(Net, HandlerExceptionBecomesRemoteErrorAndConnectionSurvives) {
  net::Server server("127.0.0.1", 0, kSecret, [](net::Message&& m) -> net::Message {
    if (m.type == net::Backward) throw std::runtime_error("no activations for \"mb-7\"");
    return echo(std::move(m));
  });
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  net::Message req;
  req.type = net::Backward;
  try {
    client.call(req, 5s);
    FAIL() << "expected RemoteError";
  } catch (const net::RemoteError& e) {
    EXPECT_EQ(e.remote_message(), "no activations for \"mb-7\"");
    EXPECT_FALSE(e.timed_out());
  }
  EXPECT_EQ(client.call(float_request(10, 1), 5s).type, net::ForwardReply);
  EXPECT_EQ(server.stats().handler_errors, 1u);
}

// A handler's CodedError reaches the caller as RemoteError::code(); any other exception is
// ErrorCode::Generic; an Error reply with a code the client does not know is a clear NetError.
TEST(Net, HandlerCodedErrorReachesTheClientsRemoteErrorCode) {
  net::Server server("127.0.0.1", 0, kSecret, [](net::Message&& m) -> net::Message {
    if (m.type == net::Backward) throw net::CodedError(net::ErrorCode::ActivationMissing, "activation_missing");
    if (m.type == net::Forward) throw std::runtime_error("plain failure");
    net::Message odd;  // a peer speaking a newer set of codes
    odd.type = net::Error;
    odd.meta = R"({"error":"brewing","code":"teapot"})";
    return odd;
  });
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  auto code_of = [&](uint16_t type) {
    net::Message req;
    req.type = type;
    try {
      client.call(req, 5s);
    } catch (const net::RemoteError& e) {
      return std::make_pair(e.code(), e.remote_message());
    }
    ADD_FAILURE() << "expected RemoteError";
    return std::make_pair(net::ErrorCode::Generic, std::string());
  };
  EXPECT_EQ(code_of(net::Backward), std::make_pair(net::ErrorCode::ActivationMissing, std::string("activation_missing")));
  EXPECT_EQ(code_of(net::Forward), std::make_pair(net::ErrorCode::Generic, std::string("plain failure")));
  net::Message req;
  req.type = net::Ping;
  try {
    client.call(req, 5s);
    FAIL() << "expected NetError";
  } catch (const net::RemoteError& e) {
    FAIL() << "an unknown code must not pass for a known one: " << e.what();
  } catch (const net::NetError& e) {
    EXPECT_NE(std::string(e.what()).find("bad reply: error.meta.code: \"teapot\" is not one of"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("brewing"), std::string::npos) << e.what();
    EXPECT_FALSE(e.timed_out());
  }
  EXPECT_EQ(server.stats().handler_errors, 2u);
}

// The server's own refusals carry codes too.
TEST(Net, ServerRefusalsCarryCodes) {
  net::Server server("127.0.0.1", 0, kSecret, echo);
  server.start();
  {
    RawSocket raw(server.port(), true);
    raw.send(std::string(40, 'Z'));
    EXPECT_EQ(net::decode_error(raw.reply(raw.read_to_eof(5s))).code, net::ErrorCode::BadFrame);
  }
  {
    RawSocket raw(server.port(), true);
    raw.send(raw.frame(float_request(4, 0), "guess"));
    EXPECT_EQ(net::decode_error(raw.reply(raw.read_to_eof(5s))).code, net::ErrorCode::Unauthenticated);
  }
}

TEST(Net, MalformedFrameGetsNamedErrorThenServerServesOthers) {
  net::Server server("127.0.0.1", 0, kSecret, echo);
  server.start();
  {
    RawSocket raw(server.port(), true);
    raw.send(std::string(40, 'Z'));  // magic 0x5A5A5A5A
    bool eof = false;
    std::string reply = raw.read_to_eof(5s, &eof);
    EXPECT_TRUE(eof) << "server must close after a malformed frame";
    net::Message m = raw.reply(reply);
    EXPECT_EQ(m.type, net::Error);
    EXPECT_NE(net::error_text(m).find("header.magic: 0x5A5A5A5A is not SWRM"), std::string::npos) << net::error_text(m);
  }
  {
    RawSocket raw(server.port(), true);  // valid header, descriptor with a bad rank
    net::Message bad;
    bad.type = net::Forward;
    bad.request_id = 42;
    bad.tensors.push_back(net::WireTensor::allocate(net::DType::Int8, std::vector<int64_t>(9, 1)));
    raw.send(raw.frame(bad));
    net::Message m = raw.reply(raw.read_to_eof(5s));
    EXPECT_EQ(m.request_id, 42u);
    EXPECT_EQ(net::error_text(m), "tensor[0].ndim: 9 exceeds limit 8");
  }
  net::Client client("127.0.0.1", server.port(), kSecret);
  EXPECT_EQ(client.call(float_request(1000, 2), 5s).tensors.at(0).nbytes, 4000u);
  EXPECT_EQ(server.stats().bad_frames, 2u);
}

TEST(Net, WrongSecretIsUnauthenticated) {
  net::Server server("127.0.0.1", 0, kSecret, echo);
  server.start();
  {  // The server answers Error "unauthenticated" (sealed with its own keys) and closes.
    RawSocket raw(server.port(), true);
    net::Message req = float_request(100, 0);
    req.request_id = 3;
    raw.send(raw.frame(req, "guess"));
    bool eof = false;
    net::Message m = raw.reply(raw.read_to_eof(5s, &eof));
    EXPECT_TRUE(eof);
    EXPECT_EQ(m.type, net::Error);
    EXPECT_EQ(m.request_id, 3u);
    EXPECT_EQ(net::error_text(m), "unauthenticated");
  }
  // A Client with the wrong secret does not get past the handshake, and says why.
  net::Client intruder("127.0.0.1", server.port(), "guess");
  try {
    intruder.call(float_request(100, 0), 5s);
    FAIL() << "expected NetError";
  } catch (const net::NetError& e) {
    EXPECT_NE(std::string(e.what()).find("handshake: key confirmation failed: the peer does not hold this job's secret"),
              std::string::npos)
        << e.what();
  }
  for (int i = 0; i < 200 && server.stats().handshake_failures < 1; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.stats().auth_failures, 1u);
  EXPECT_EQ(server.stats().handshake_failures, 1u);
  EXPECT_EQ(server.stats().frames_in, 0u);
}

TEST(Net, HalfFrameThenSilenceOnlyCostsItsOwnConnection) {
  net::ServerOptions opts;
  opts.idle_timeout = 300ms;
  net::Server server("127.0.0.1", 0, kSecret, echo, opts);
  server.start();
  RawSocket raw(server.port(), true);
  std::string f = raw.frame(float_request(1000, 0));
  raw.send(f.substr(0, f.size() / 2));
  net::Client client("127.0.0.1", server.port(), kSecret);
  EXPECT_EQ(client.call(float_request(10, 0), 2s).type, net::ForwardReply);  // not stalled
  auto t0 = Clock::now();
  bool eof = false;
  raw.read_to_eof(5s, &eof);
  EXPECT_TRUE(eof);
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_GE(server.stats().idle_closed, 1u);
}

TEST(Net, SilentPeerTimesOut) {
  SilentListener silent;
  net::Client client("127.0.0.1", silent.port, kSecret);
  auto timeout = 400ms;
  auto t0 = Clock::now();
  try {
    client.call(float_request(100, 0), timeout);
    FAIL() << "expected a timeout";
  } catch (const net::NetError& e) {
    auto took = Clock::now() - t0;
    EXPECT_TRUE(e.timed_out()) << e.what();
    EXPECT_FALSE(e.request_sent()) << "the handshake never completed: the request never left";
    EXPECT_GE(took, timeout);
    // Bounded by the timeout, not by the silent peer (which never answers): the slack is for a
    // loaded machine's scheduling, not a property of the client.
    EXPECT_LT(took, timeout + 3s);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(silent.port)), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("timed out after 400 ms"), std::string::npos) << e.what();
  }
  EXPECT_EQ(client.stats().timeouts, 1u);
}

TEST(Net, SlowHandlerTimesOutCall) {
  // The first request's handler blocks until the test lets it go, after the call has given up:
  // the call ends by its timeout, whatever the machine's load, not by the handler's answer.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  net::Server server("127.0.0.1", 0, kSecret, [&](net::Message&& m) {
    if (calls++ == 0) released.wait();
    return echo(std::move(m));
  });
  server.start();
  struct Release {
    std::promise<void>& p;
    bool done = false;
    void now() {
      if (!done) p.set_value();
      done = true;
    }
    ~Release() { now(); }  // before the server stops (declared after it), also when an assertion fails
  } let_go{release};
  net::Client client("127.0.0.1", server.port(), kSecret);
  auto t0 = Clock::now();
  try {
    client.call(float_request(10, 0), 200ms);
    FAIL();
  } catch (const net::NetError& e) {
    EXPECT_TRUE(e.timed_out());
    EXPECT_TRUE(e.request_sent()) << "the handler has it: the peer may act on it";
    EXPECT_GE(Clock::now() - t0, 200ms);
    EXPECT_LT(Clock::now() - t0, 3s);
  }
  let_go.now();
  EXPECT_EQ(client.call(float_request(10, 0), 5s).type, net::ForwardReply);  // a fresh connection
}

TEST(Net, ConnectFailureNamesEndpoint) {
  uint16_t port;
  {
    SilentListener l;
    port = l.port;
  }  // closed: nothing listens there now
  net::Client client("127.0.0.1", port, kSecret);
  try {
    client.call(float_request(1, 0), 2s);
    FAIL();
  } catch (const net::NetError& e) {
    EXPECT_FALSE(e.timed_out());
    EXPECT_FALSE(e.request_sent()) << "nothing listened: the request never left";
    EXPECT_EQ(e.endpoint(), "127.0.0.1:" + std::to_string(port));
    EXPECT_NE(std::string(e.what()).find("connect failed"), std::string::npos) << e.what();
  }
}

TEST(Net, ConcurrentCallsFromEightThreads) {
  std::atomic<int> in_handler{0}, max_in_handler{0};
  net::Server server("127.0.0.1", 0, kSecret, [&](net::Message&& m) {
    int now = ++in_handler;
    int prev = max_in_handler.load();
    while (now > prev && !max_in_handler.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(1ms);
    --in_handler;
    return echo(std::move(m));
  });
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        float base = static_cast<float>(t * 1000 + i);
        net::Message rep = client.call(float_request(256 + t, base), 10s);
        const float* f = reinterpret_cast<const float*>(rep.tensors.at(0).data);
        if (rep.tensors[0].numel() == 256 + t && f[0] == base && f[255] == base + 255) ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 8 * 40);
  EXPECT_GT(max_in_handler.load(), 1);  // really concurrent
  EXPECT_LE(client.stats().connects, 8u);
}

TEST(Net, ConnectionCapRefusesClearly) {
  net::ServerOptions opts;
  opts.max_connections = 1;
  net::Server server("127.0.0.1", 0, kSecret, echo, opts);
  server.start();
  RawSocket hog(server.port());
  for (int i = 0; i < 200 && server.stats().connections_active < 1; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server.stats().connections_active, 1u);
  net::Client client("127.0.0.1", server.port(), kSecret);
  try {
    client.call(float_request(10, 0), 5s);
    FAIL();
  } catch (const net::RemoteError& e) {
    EXPECT_NE(e.remote_message().find("server busy"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.stats().connections_refused, 1u);
}

TEST(Net, StalePooledConnectionIsReplaced) {
  net::ServerOptions opts;
  opts.idle_timeout = 150ms;
  net::Server server("127.0.0.1", 0, kSecret, echo, opts);
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  EXPECT_EQ(client.call(float_request(10, 0), 2s).type, net::ForwardReply);
  // Until the server closed the idle connection (polled, with a deadline).
  for (int i = 0; i < 1000 && server.stats().idle_closed < 1; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(server.stats().idle_closed, 1u);
  EXPECT_EQ(client.call(float_request(10, 0), 2s).type, net::ForwardReply);
  EXPECT_EQ(client.stats().connects, 2u);
}

TEST(Net, StopIsPromptWithIdleConnections) {
  auto server = std::make_unique<net::Server>("127.0.0.1", 0, kSecret, echo);
  server->start();
  RawSocket a(server->port()), b(server->port());
  net::Client client("127.0.0.1", server->port(), kSecret);
  client.call(float_request(10, 0), 2s);
  auto t0 = Clock::now();
  server.reset();
  EXPECT_LT(Clock::now() - t0, 1s);
  bool eof = false;
  a.read_to_eof(2s, &eof);
  EXPECT_TRUE(eof);
  EXPECT_THROW(client.call(float_request(10, 0), 1s), net::NetError);
}

TEST(Net, OversizedRequestIsRejectedWithItsReason) {
  net::ServerOptions opts;
  opts.limits.max_tensor_bytes = 1 << 20;
  net::Server server("127.0.0.1", 0, kSecret, echo, opts);
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  try {
    client.call(float_request(8 << 20, 0), 10s);  // 32 MiB: rejected at its descriptor
    FAIL();
  } catch (const net::RemoteError& e) {
    EXPECT_EQ(e.remote_message(), "tensor[0].nbytes: 33554432 exceeds limit 1048576");
  }
  EXPECT_EQ(client.call(float_request(1000, 0), 5s).type, net::ForwardReply);
}

TEST(Net, WritingIntoAClosedConnectionIsAnErrorNotASignal) {
  net::ServerOptions opts;
  opts.limits.max_tensor_bytes = 1 << 20;
  opts.error_linger = 0ms;  // close at once, with the rest of the request unread
  net::Server server("127.0.0.1", 0, kSecret, echo, opts);
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(client.call(float_request(16 << 20, 0), 10s), net::NetError);  // no SIGPIPE
  }
  EXPECT_EQ(client.call(float_request(1000, 0), 5s).type, net::ForwardReply);
}

// Encrypted end to end over TCP: a 4 MiB tensor round trip, and nothing of it readable on the wire.
TEST(Net, EncryptedRoundTripKeepsTensorBytesOffTheWire) {
  net::ServerOptions so;
  so.protection = net::Protection::Encrypted;
  net::Server server("127.0.0.1", 0, kSecret, echo, so);
  server.start();
  net::ClientOptions co;
  co.protection = net::Protection::Encrypted;
  net::Client client("127.0.0.1", server.port(), kSecret, co);
  for (int i = 0; i < 3; ++i) {
    net::Message req = float_request(1 << 20, static_cast<float>(i));
    net::Message rep = client.call(req, 10s);
    ASSERT_EQ(rep.tensors.size(), 1u);
    EXPECT_EQ(std::memcmp(rep.tensors[0].data, req.tensors[0].data, rep.tensors[0].nbytes), 0);
  }
  EXPECT_EQ(client.stats().connects, 1u);
  // What a raw peer with the right secret sees of an encrypted reply before opening it.
  RawSocket raw(server.port(), true, net::Protection::Encrypted);
  net::Message req = float_request(256, 7);
  req.meta = R"({"note":"visible only to the job"})";
  raw.send(raw.frame(req));
  const std::string bytes = raw.read_to_eof(2s);
  EXPECT_EQ(bytes.find("visible only to the job"), std::string::npos);
  const std::string data(reinterpret_cast<const char*>(req.tensors[0].data), req.tensors[0].nbytes);
  EXPECT_EQ(bytes.find(data.substr(0, 64)), std::string::npos);
  net::Message back = raw.reply(bytes);
  EXPECT_EQ(back.meta, req.meta);
  EXPECT_EQ(std::memcmp(back.tensors.at(0).data, req.tensors[0].data, req.tensors[0].nbytes), 0);
}

// A byte changed on the path, in the tensor bytes, is refused by the server (unauthenticated),
// which closes that connection; other connections are served.
TEST(Net, ATensorByteChangedOnThePathIsRefused) {
  for (auto p : {net::Protection::Authenticated, net::Protection::Encrypted}) {
    SCOPED_TRACE(net::protection_name(p));
    net::ServerOptions so;
    so.protection = p;
    net::Server server("127.0.0.1", 0, kSecret, echo, so);
    server.start();
    RawSocket raw(server.port(), true, p);
    net::Message req = float_request(1000, 1);
    req.request_id = 9;
    std::string f = raw.frame(req);
    f[f.size() - 16 - 100] ^= 0x01;  // a bit of the last tensor's data
    raw.send(f);
    bool eof = false;
    net::Message m = raw.reply(raw.read_to_eof(5s, &eof));
    EXPECT_TRUE(eof);
    EXPECT_EQ(net::decode_error(m).code, net::ErrorCode::Unauthenticated);
    EXPECT_EQ(server.stats().auth_failures, 1u);
    EXPECT_EQ(server.stats().frames_in, 0u);
    net::ClientOptions co;
    co.protection = p;
    net::Client client("127.0.0.1", server.port(), kSecret, co);
    EXPECT_EQ(client.call(float_request(10, 0), 5s).type, net::ForwardReply);
  }
}

// Processes of one job configured with different transports cannot talk, and say why.
TEST(Net, MismatchedTransportsFailWithAClearError) {
  net::ServerOptions so;
  so.protection = net::Protection::Encrypted;
  net::Server server("127.0.0.1", 0, kSecret, echo, so);
  server.start();
  net::Client client("127.0.0.1", server.port(), kSecret);  // authenticated
  try {
    client.call(float_request(10, 0), 5s);
    FAIL() << "expected NetError";
  } catch (const net::NetError& e) {
    EXPECT_NE(std::string(e.what()).find("handshake: the peer protects frames as encrypted, this side as "
                                         "authenticated"),
              std::string::npos)
        << e.what();
  }
  for (int i = 0; i < 200 && server.stats().handshake_failures < 1; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.stats().handshake_failures, 1u);
  EXPECT_EQ(server.stats().frames_in, 0u);
}
