// The data plane's session (worker/net/session.h): hellos, the protections' names, key agreement.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "worker/net/errors.h"
#include "worker/net/session.h"
#include "tests/net/fixed_sessions.h"

namespace net = swarm::net;

using net::testing::hello;
using net::testing::kSecret;

TEST(Session, HellosAreCheckedAndMustAgree) {
  uint8_t b[net::kHelloBytes];
  net::encode_hello(net::make_hello(net::Protection::Encrypted), b);
  EXPECT_EQ(net::parse_hello(b).protection, net::Protection::Encrypted);
  auto expect_bad = [&](size_t at, uint8_t value, const std::string& what) {
    uint8_t c[net::kHelloBytes];
    std::memcpy(c, b, sizeof c);
    c[at] = value;
    try {
      net::parse_hello(c);
      ADD_FAILURE() << "accepted a hello with byte " << at << " = " << int(value);
    } catch (const net::WireError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_bad(0, 'X', "hello.magic");
  expect_bad(4, 1, "hello.version: 1 is not supported");
  expect_bad(6, 3, "hello.protection: 3");
  try {
    net::make_session(kSecret, true, hello(1, net::Protection::Authenticated), hello(2, net::Protection::Encrypted));
    ADD_FAILURE() << "a session with mismatched protections";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("spec.security.transport"), std::string::npos) << e.what();
  }
  EXPECT_EQ(net::parse_protection("encrypted"), net::Protection::Encrypted);
  EXPECT_THROW(net::parse_protection("tls"), std::invalid_argument);
  // Two hellos never repeat (fresh randoms): two connections never share keys.
  EXPECT_NE(net::make_hello(net::Protection::Encrypted).random, net::make_hello(net::Protection::Encrypted).random);
}

// Both sides derive the same keys and confirmations from the hellos: what one seals the other
// opens, in each direction, and each expects the confirmation the other sends.
TEST(Session, BothSidesAgreeOnKeysAndConfirmations) {
  for (auto p : {net::Protection::Authenticated, net::Protection::Encrypted}) {
    auto [client, server] = net::session_pair(kSecret, p);
    EXPECT_EQ(client.my_confirmation, server.their_confirmation);
    EXPECT_EQ(server.my_confirmation, client.their_confirmation);
    EXPECT_NE(client.my_confirmation, server.my_confirmation);
    uint8_t header[40] = {1, 2, 3};
    std::string data(1000, 'd'), sealed(1000, '\0');
    client.tx->begin_seal(header);
    client.tx->update(data.data(), sealed.data(), data.size());
    const auto tag = client.tx->finish_seal();
    std::string wire = p == net::Protection::Encrypted ? sealed : data;
    EXPECT_EQ(wire == data, p == net::Protection::Authenticated);
    server.rx->begin_open(header);
    server.rx->update(wire.data(), wire.data(), wire.size());
    EXPECT_NO_THROW(server.rx->finish_open(tag.data()));
    EXPECT_EQ(wire, data);
  }
  // Another secret: other confirmations, so the handshake fails before any frame.
  const net::Hello c = hello(1, net::Protection::Encrypted), s = hello(2, net::Protection::Encrypted);
  EXPECT_NE(net::make_session(kSecret, true, c, s).their_confirmation,
            net::make_session("another", false, s, c).my_confirmation);
}
