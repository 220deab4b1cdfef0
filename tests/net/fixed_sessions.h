// Sessions with fixed hellos for the codec tests (frame_test.cc, session_test.cc): a frame built by
// hand and one encoded by the codec are then byte for byte the same.
#pragma once

#include <cstdint>
#include <string>

#include "worker/net/session.h"

namespace swarm::net::testing {

inline const std::string kSecret = "job-secret";

inline Hello hello(uint8_t fill, Protection p) {
  Hello h;
  h.protection = p;
  h.random.fill(fill);
  return h;
}

inline Session client_session(Protection p = Protection::Authenticated, const std::string& secret = kSecret) {
  return make_session(secret, true, hello(1, p), hello(2, p));
}

inline Session server_session(Protection p = Protection::Authenticated, const std::string& secret = kSecret) {
  return make_session(secret, false, hello(2, p), hello(1, p));
}

}  // namespace swarm::net::testing
