// Frames built field by field for the codec tests (frame_test.cc, blockwise8_test.cc), malformed
// ones included, with a correct tag; and the decoder's side of them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/net/fixed_sessions.h"
#include "worker/net/frame.h"

namespace swarm::net::testing {

template <class T>
void put(std::string& s, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) s += static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
}

// Builds frames field by field, malformed ones included, with a correct tag (authenticated, the
// first frame of client_session()).
struct Raw {
  struct Desc {
    uint8_t dtype;
    uint8_t ndim;  // may disagree with dims.size() on purpose
    std::vector<int64_t> dims;
    uint64_t nbytes;
    std::string data;
    uint16_t block = 0;  // the descriptor's u16: blockwise8's values per block
  };
  uint32_t magic = kMagic;
  uint16_t version = 2;
  uint16_t type = Forward;
  uint64_t request_id = 5;
  std::string meta = "{}";
  int64_t meta_len = -1;   // -1: meta.size()
  int64_t n_tensors = -1;  // -1: descs.size()
  int64_t body_len = -1;   // -1: computed
  std::vector<Desc> descs;

  void add(DType dt, std::vector<int64_t> dims, uint16_t block = 0) {
    uint64_t n = 0;
    checked_nbytes(dt, dims.data(), dims.size(), &n, block);
    descs.push_back({static_cast<uint8_t>(dt), static_cast<uint8_t>(dims.size()), dims, n, std::string(n, 'x'), block});
  }

  std::string build(const std::string& secret = kSecret) const {
    std::string body;
    for (const Desc& d : descs) {
      std::string ds;
      ds += static_cast<char>(d.dtype);
      ds += static_cast<char>(d.ndim);
      put<uint16_t>(ds, d.block);
      ds.append(4, '\0');
      for (int64_t x : d.dims) put<int64_t>(ds, x);
      put<uint64_t>(ds, d.nbytes);
      body += ds + d.data;
    }
    std::string h;
    put<uint32_t>(h, magic);
    put<uint16_t>(h, version);
    put<uint16_t>(h, type);
    put<uint64_t>(h, request_id);
    put<uint32_t>(h, static_cast<uint32_t>(meta_len < 0 ? meta.size() : meta_len));
    put<uint32_t>(h, static_cast<uint32_t>(n_tensors < 0 ? descs.size() : n_tensors));
    put<uint64_t>(h, body_len < 0 ? body.size() : static_cast<uint64_t>(body_len));
    h.append(8, '\0');
    auto session = client_session(Protection::Authenticated, secret);
    session.tx->begin_seal(reinterpret_cast<const uint8_t*>(h.data()));
    const std::string rest = meta + body;
    session.tx->update(rest.data(), nullptr, rest.size());
    const auto tag = session.tx->finish_seal();
    return h + rest + std::string(tag.begin(), tag.end());
  }
};

inline Message decode(const std::string& f, const Limits& lim = {}, const std::string& secret = kSecret,
                    Protection p = Protection::Authenticated) {
  auto s = server_session(p, secret);
  return decode_frame(reinterpret_cast<const uint8_t*>(f.data()), f.size(), *s.rx, lim);
}

// Decoding must fail with a WireError whose message contains `expect`.
inline void expect_reject(const std::string& frame, const std::string& expect, const Limits& lim = {},
                   const std::string& secret = kSecret) {
  try {
    decode(frame, lim, secret);
    ADD_FAILURE() << "decoded, expected error containing: " << expect;
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << "got: " << e.what();
  }
}

}  // namespace swarm::net::testing
