// What the fuzz targets share (tests/fuzz/README.md): the secret and session the frame seeds are
// sealed with, and how a target reports a finding.
//
// A decoder may refuse its input only with the exceptions its header documents. Anything else — an
// exception of another type, a 500 from the registry, a broken invariant — is a finding: the
// target prints it and aborts, and libFuzzer saves the input as a crash-* artifact. Crashes and
// sanitizer reports (ASan, UBSan, LeakSanitizer) are findings by themselves.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "worker/net/session.h"

namespace swarm::fuzz {

// The data-plane secret of the frame target and of the frames make_seeds writes.
inline constexpr const char* kSecret = "fuzz-secret";

// The frame target's input: one byte choosing the protection (bit 0: encrypted), then the first
// frame of a connection whose hellos are fixed (so the seeds make_seeds seals are valid frames).
inline net::Session frame_session(bool client, net::Protection p) {
  net::Hello c, s;
  c.protection = s.protection = p;
  c.random.fill(1);
  s.random.fill(2);
  return client ? net::make_session(kSecret, true, c, s) : net::make_session(kSecret, false, s, c);
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A finding for an exception the decoder does not document.
[[noreturn]] inline void unexpected(const char* decoder, const std::exception& e) {
  finding(std::string(decoder) + " threw " + typeid(e).name() + ": " + e.what());
}

}  // namespace swarm::fuzz
