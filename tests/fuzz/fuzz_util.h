// What the fuzz targets share (tests/fuzz/README.md): the secret the frame seeds are signed with,
// and how a target reports a finding.
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

namespace swarm::fuzz {

// The data-plane secret of the frame target and of the frames make_seeds writes.
inline constexpr const char* kSecret = "fuzz-secret";

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
