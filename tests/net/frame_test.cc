// The wire codec on byte buffers: round trips, every rejection the contract names, the session's
// authentication and encryption (every byte of a frame), replays, fuzz.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/net/auth.h"
#include "worker/net/frame.h"
#include "worker/net/message.h"
#include "tests/net/fixed_sessions.h"
#include "tests/net/raw_frame.h"

namespace net = swarm::net;
using net::DType;

namespace {

using net::testing::client_session;
using net::testing::hello;
using net::testing::kSecret;
using net::testing::server_session;
using net::testing::Raw;
using net::testing::decode;
using net::testing::expect_reject;

// The first frame of a fresh connection.
std::string encode(const net::Message& m, net::Protection p = net::Protection::Authenticated) {
  auto s = client_session(p);
  return net::encode_frame(m, *s.tx);
}

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float16, DType::BFloat16, DType::Int64,
                                       DType::Int32,   DType::UInt8,   DType::Float64,  DType::Int8};

std::string hex(const net::Mac& m) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : m) s += {d[b >> 4], d[b & 15]};
  return s;
}

net::WireTensor patterned(DType dt, std::vector<int64_t> shape, int seed) {
  net::WireTensor t = net::WireTensor::allocate(dt, std::move(shape));
  for (size_t i = 0; i < t.nbytes; ++i) t.data[i] = static_cast<uint8_t>(i * 31 + seed);
  return t;
}

net::Message sample() {
  net::Message m;
  m.type = net::Forward;
  m.request_id = 77;
  m.meta = R"({"stage":1})";
  m.tensors.push_back(patterned(DType::Float32, {2, 3}, 1));
  m.tensors.push_back(patterned(DType::Int64, {4}, 2));
  return m;
}

}  // namespace

TEST(DType, SizesAndNames) {
  std::vector<size_t> sizes = {4, 2, 2, 8, 4, 1, 8, 1};
  for (size_t i = 0; i < kAllDTypes.size(); ++i) {
    EXPECT_EQ(net::dtype_size(kAllDTypes[i]), sizes[i]);
    EXPECT_EQ(static_cast<int>(kAllDTypes[i]), static_cast<int>(i + 1));
  }
  EXPECT_STREQ(net::dtype_name(DType::BFloat16), "bfloat16");
  EXPECT_EQ(net::dtype_size(DType::Blockwise8), 1u);  // its codes; the scales come per block
  EXPECT_STREQ(net::dtype_name(DType::Blockwise8), "blockwise8");
  EXPECT_EQ(static_cast<int>(DType::Blockwise8), 9);
  EXPECT_EQ(net::dtype_size(static_cast<DType>(10)), 0u);
  EXPECT_STREQ(net::dtype_name(static_cast<DType>(0)), "unknown");
}

TEST(Auth, Rfc4231Vectors) {
  std::string key1(20, '\x0b');
  EXPECT_EQ(hex(net::hmac_sha256(key1, "Hi There", 8)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const char* data2 = "what do ya want for nothing?";
  net::Hmac h("Jefe");
  h.update(data2, 10);  // incremental == one shot
  h.update(data2 + 10, std::strlen(data2) - 10);
  EXPECT_EQ(hex(h.finish()), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  net::Mac a = net::hmac_sha256("k", "x", 1), b = a;
  EXPECT_TRUE(net::mac_equal(a.data(), b.data(), a.size()));
  b[31] ^= 1;
  EXPECT_FALSE(net::mac_equal(a.data(), b.data(), a.size()));
  EXPECT_THROW(net::Hmac(""), std::invalid_argument);
}

TEST(Message, ErrorTextRoundTrip) {
  std::string what = "bad \"thing\"\n\tat \\ tensor[1]\x01";
  net::Message e = net::make_error(9, what);
  EXPECT_EQ(e.type, net::Error);
  EXPECT_EQ(e.request_id, 9u);
  EXPECT_EQ(net::error_text(e), what);
  EXPECT_EQ(e.meta.front(), '{');
}

// An Error frame carries a machine-readable code next to its text; both survive the wire.
TEST(Message, ErrorFrameCarriesItsCode) {
  for (net::ErrorCode code : net::kErrorCodes) {
    SCOPED_TRACE(net::to_string(code));
    net::Message e = net::make_error(5, "it \"broke\"\n", code);
    net::Message back = decode(encode(e));
    EXPECT_EQ(back.type, net::Error);
    net::ErrorInfo info = net::decode_error(back);
    EXPECT_EQ(info.code, code);
    EXPECT_EQ(info.text, "it \"broke\"\n");
    EXPECT_EQ(net::error_text(back), "it \"broke\"\n");
    EXPECT_EQ(net::find_error_code(net::to_string(code)), code);
  }
  EXPECT_EQ(net::error_code_names(), "error, bad_frame, unauthenticated, busy, activation_missing, step_closed");
  EXPECT_EQ(net::make_error(1, "x", net::ErrorCode::ActivationMissing).meta,
            R"({"error":"x","code":"activation_missing"})");
}

TEST(Message, ErrorReplyKeepsACodedErrorsCode) {
  net::Message coded = net::error_reply(3, net::CodedError(net::ErrorCode::StepClosed, "step_closed"));
  EXPECT_EQ(coded.request_id, 3u);
  EXPECT_EQ(net::decode_error(coded).code, net::ErrorCode::StepClosed);
  EXPECT_EQ(net::decode_error(coded).text, "step_closed");
  net::Message plain = net::error_reply(4, std::runtime_error("no such microbatch"));
  EXPECT_EQ(net::decode_error(plain).code, net::ErrorCode::Generic);
  EXPECT_EQ(net::decode_error(plain).text, "no such microbatch");
}

// A peer that predates codes sends {"error":"..."} alone: the generic code. Other members are ignored.
TEST(Message, ErrorWithoutACodeIsGeneric) {
  net::Message old;
  old.type = net::Error;
  old.meta = R"({"error":"worker is stopping"})";
  EXPECT_EQ(net::decode_error(old).code, net::ErrorCode::Generic);
  EXPECT_EQ(net::decode_error(old).text, "worker is stopping");
  old.meta = R"( { "code" : "busy", "retry" : 1.5e0, "final": true, "x": null, "note": "\u00e9\/" , "error" : "full" } )";
  EXPECT_EQ(net::decode_error(old).code, net::ErrorCode::Busy);
  EXPECT_EQ(net::decode_error(old).text, "full");
}

// A bad Error meta is a WireError naming the field and the value, never a crash.
TEST(Message, MalformedErrorMetaIsAClearWireError) {
  auto error_of = [](const std::string& meta) -> std::string {
    net::Message m;
    m.type = net::Error;
    m.meta = meta;
    try {
      net::decode_error(m);
    } catch (const net::WireError& e) {
      EXPECT_EQ(net::error_text(m), meta);  // error_text falls back to the whole meta
      return e.what();
    }
    ADD_FAILURE() << "accepted " << meta;
    return "";
  };
  EXPECT_EQ(error_of(R"({"error":"x","code":"teapot"})"),
            "error.meta.code: \"teapot\" is not one of error, bad_frame, unauthenticated, busy, activation_missing, "
            "step_closed (the error said: \"x\")");
  EXPECT_EQ(error_of(R"({"error":"x","code":7})"), "error.meta.code: must be a string, got \"7}\"");
  EXPECT_EQ(error_of(R"({"code":"busy"})"), "error.meta.error: is required, got \"{\\\"code\\\":\\\"busy\\\"}\"");
  EXPECT_EQ(error_of(""), "error.meta: must be a JSON object, got \"\"");
  EXPECT_EQ(error_of("[1]"), "error.meta: must be a JSON object, got \"[1]\"");
  EXPECT_NE(error_of(R"({"error":"x")").find("error.meta: expected ',' or '}'"), std::string::npos);
  EXPECT_NE(error_of(R"({"error":"x)").find("error.meta: unterminated string"), std::string::npos);
  EXPECT_NE(error_of(R"({"error":"x"} extra)").find("error.meta: trailing characters"), std::string::npos);
  EXPECT_NE(error_of(R"({"error":"x","more":{"a":1}})").find("member \"more\""), std::string::npos);
  EXPECT_NE(error_of(R"({"error":"\u12"})").find("bad \\u escape"), std::string::npos);
  EXPECT_NE(error_of(R"({"error":"\q"})").find("bad escape \\q"), std::string::npos);
  EXPECT_NE(error_of("{\"error\":\"a\nb\"}").find("unescaped control character"), std::string::npos);
  EXPECT_NE(error_of(R"({"error" "x"})").find("expected ':'"), std::string::npos);
  // Long metas are cut in the message.
  EXPECT_LT(error_of("{\"error\":\"" + std::string(10000, 'a')).size(), 200u);
  // Random bytes: never a crash, always a WireError or a result.
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":,\\u0123abcdefnrt -.eE";
  for (int i = 0; i < 2000; ++i) {
    net::Message m;
    m.type = net::Error;
    std::string meta = i % 2 ? R"({"error":"x","code":"busy"})" : "";
    for (int k = 0; k < 12; ++k) {
      if (!meta.empty() && rng() % 3 == 0) meta[rng() % meta.size()] = alphabet[rng() % alphabet.size()];
      else meta += alphabet[rng() % alphabet.size()];
    }
    m.meta = meta;
    try {
      net::decode_error(m);
    } catch (const net::WireError&) {
    }
  }
}

TEST(Message, AllocateIsAlignedAndViewWraps) {
  for (auto shape : std::vector<std::vector<int64_t>>{{}, {0}, {3, 5}, {1000}}) {
    net::WireTensor t = net::WireTensor::allocate(DType::Float16, shape);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
    EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel()) * 2);
  }
  EXPECT_EQ(net::WireTensor::allocate(DType::Int8, {}).numel(), 1);
  auto buf = std::make_shared<std::vector<float>>(6, 1.5f);
  net::WireTensor v = net::WireTensor::view(DType::Float32, {2, 3}, buf->data(), buf);
  EXPECT_EQ(v.nbytes, 24u);
  EXPECT_EQ(v.data, reinterpret_cast<uint8_t*>(buf->data()));
  EXPECT_THROW(net::WireTensor::allocate(DType::Float32, {-1}), std::invalid_argument);
  EXPECT_THROW(net::WireTensor::allocate(static_cast<DType>(42), {1}), std::invalid_argument);
}

TEST(Frame, LayoutMatchesContract) {
  net::Message m = sample();
  std::string f = encode(m);
  ASSERT_GE(f.size(), 40u);
  EXPECT_EQ(f.substr(0, 4), "SWRM");
  size_t descs = net::desc_bytes(2) + net::desc_bytes(1);
  size_t data = 24 + 32;
  EXPECT_EQ(f.size(), 40 + m.meta.size() + descs + data + 16);
  net::FrameHeader h = net::parse_header(reinterpret_cast<const uint8_t*>(f.data()));
  EXPECT_EQ(h.version, 2);
  EXPECT_EQ(h.type, net::Forward);
  EXPECT_EQ(h.request_id, 77u);
  EXPECT_EQ(h.meta_len, m.meta.size());
  EXPECT_EQ(h.n_tensors, 2u);
  EXPECT_EQ(h.body_len, descs + data);
  // Same bytes as the field-by-field builder.
  Raw r;
  r.request_id = 77;
  r.meta = m.meta;
  r.add(DType::Float32, {2, 3});
  r.add(DType::Int64, {4});
  r.descs[0].data.assign(reinterpret_cast<char*>(m.tensors[0].data), 24);
  r.descs[1].data.assign(reinterpret_cast<char*>(m.tensors[1].data), 32);
  EXPECT_EQ(r.build(), f);
}

TEST(Frame, RoundTripEveryDTypeAndShape) {
  std::vector<std::vector<int64_t>> shapes = {{}, {0}, {1}, {7}, {2, 3}, {2, 0, 4}, {3, 1, 2, 1}, {1, 1, 1, 1, 1, 1, 1, 2}};
  int seed = 0;
  for (DType dt : kAllDTypes) {
    net::Message m;
    m.type = 1234;  // open set of types
    m.request_id = 0xFFFFFFFFFFFFFFF0ull + seed;
    m.meta = "{\"dtype\":\"" + std::string(net::dtype_name(dt)) + "\"}";
    for (const auto& s : shapes) m.tensors.push_back(patterned(dt, s, ++seed));
    net::Message back = decode(encode(m));
    EXPECT_EQ(back.type, m.type);
    EXPECT_EQ(back.request_id, m.request_id);
    EXPECT_EQ(back.meta, m.meta);
    ASSERT_EQ(back.tensors.size(), m.tensors.size());
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const net::WireTensor& a = m.tensors[i];
      const net::WireTensor& b = back.tensors[i];
      EXPECT_EQ(b.dtype, dt);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.numel(), a.numel());
      ASSERT_EQ(b.nbytes, a.nbytes);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 64, 0u);
      EXPECT_TRUE(b.owner);
    }
  }
  net::Message empty;  // no meta, no tensors
  empty.type = net::Ping;
  net::Message back = decode(encode(empty));
  EXPECT_EQ(back.type, net::Ping);
  EXPECT_TRUE(back.meta.empty());
  EXPECT_TRUE(back.tensors.empty());
}

TEST(Frame, TruncatedAtEveryOffsetIsRejected) {
  std::string f = encode(sample());
  for (size_t n = 0; n < f.size(); ++n) {
    try {
      decode(f.substr(0, n));
      ADD_FAILURE() << "decoded a frame truncated to " << n << " bytes";
    } catch (const net::WireError& e) {
      std::string w = e.what();
      std::string field = n < 40 ? "header:" : n >= f.size() - 16 ? "frame.tag: authentication failed" : "";
      if (!field.empty()) {
        EXPECT_EQ(w.rfind(field, 0), 0u) << n << ": " << w;
      } else {
        bool named = w.rfind("meta:", 0) == 0 || w.rfind("tensor[", 0) == 0;
        EXPECT_TRUE(named) << n << ": " << w;
      }
      EXPECT_NE(w.find("truncated"), std::string::npos) << w;
    }
  }
  expect_reject(f + "zz", "frame: 2 trailing bytes");
}

TEST(Frame, RejectsBadHeader) {
  Raw r;
  r.magic = 0x12345678;
  expect_reject(r.build(), "header.magic: 0x12345678 is not SWRM");
  r = Raw();
  r.version = 1;  // the HMAC frames of before: tensor bytes unauthenticated
  expect_reject(r.build(), "header.version: 1 is not supported");
  r = Raw();
  r.meta = std::string(70000, ' ');
  expect_reject(r.build(), "header.meta_len: 70000 exceeds limit 65536");
  r = Raw();
  for (int i = 0; i < 65; ++i) r.add(DType::UInt8, {1});
  expect_reject(r.build(), "header.n_tensors: 65 exceeds limit 64");
  net::Limits small;
  small.max_frame_bytes = 1000;
  r = Raw();
  r.add(DType::UInt8, {2000});
  expect_reject(r.build(), "header.body_len: 2024 makes the frame exceed max_frame_bytes 1000", small);
  r = Raw();
  r.add(DType::UInt8, {1});
  r.n_tensors = 3;
  expect_reject(r.build(), "header.body_len: 25 is too small for 3 tensor descriptors");
}

TEST(Frame, RejectsBadDescriptors) {
  Raw r;
  r.add(DType::Float32, {2});
  r.descs[0].dtype = 10;
  expect_reject(r.build(), "tensor[0].dtype: 10 is not a known dtype");
  r.descs[0].dtype = 0;
  expect_reject(r.build(), "tensor[0].dtype: 0 is not a known dtype");

  r = Raw();
  r.add(DType::Float32, {2});
  r.add(DType::Float32, std::vector<int64_t>(12, 1));
  expect_reject(r.build(), "tensor[1].ndim: 12 exceeds limit 8");

  r = Raw();
  r.add(DType::Float32, {2, 3});
  r.descs[0].dims[1] = -3;
  expect_reject(r.build(), "tensor[0].dims[1]: -3 is negative");

  r = Raw();
  r.add(DType::Float32, {1});
  r.descs[0].dims = {int64_t{1} << 62, 4};
  r.descs[0].ndim = 2;
  expect_reject(r.build(), "tensor[0].shape: [4611686018427387904,4] x 4 bytes overflows 64 bits");
  r.descs[0].dims = {int64_t{1} << 62, 1};  // numel fits, numel x 4 bytes does not
  expect_reject(r.build(), "tensor[0].shape");

  r = Raw();
  r.add(DType::Float32, {5, 5});
  r.descs[0].nbytes = 99;
  r.descs[0].data.resize(99);
  expect_reject(r.build(), "tensor[0].nbytes: 99 does not match shape [5,5] of float32 (100 bytes)");

  net::Limits small;
  small.max_tensor_bytes = 1024;
  r = Raw();
  r.add(DType::Float64, {256});
  expect_reject(r.build(), "tensor[0].nbytes: 2048 exceeds limit 1024", small);
}

TEST(Frame, RejectsBodyLenDisagreeingWithDescriptors) {
  Raw r;
  r.add(DType::Int32, {4});
  r.body_len = 16 + 8 + 16 + 4;  // 4 bytes more than the descriptors account for
  std::string f = r.build();
  f.insert(f.size() - 32, 4, '\0');  // keep the frame self-consistent apart from that
  expect_reject(f, "header.body_len: 44 leaves 4 bytes after the last tensor");
  r.body_len = 30;  // less than descriptor + data
  expect_reject(r.build(), "tensor[0].nbytes: 16 overruns header.body_len (6 bytes left)");
  r.body_len = 20;  // less than the descriptor
  expect_reject(r.build(), "tensor[0]: descriptor of 24 bytes overruns header.body_len (20 bytes left)");
}

// Every byte of a frame is covered, tensor bytes included: a flipped bit anywhere is refused
// (AuthError at the tag, or a WireError when the flip makes a field invalid before it), in both
// protections; so are another secret, a missing tag and a frame opened on another connection.
TEST(Frame, EveryBitOfAFrameIsAuthenticated) {
  for (auto p : {net::Protection::Authenticated, net::Protection::Encrypted}) {
    SCOPED_TRACE(net::protection_name(p));
    const std::string f = encode(sample(), p);
    ASSERT_NO_THROW(decode(f, {}, kSecret, p));
    size_t auth = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string bad = f;
        bad[i] ^= static_cast<char>(1 << bit);
        try {
          decode(bad, {}, kSecret, p);
          ADD_FAILURE() << "byte " << i << " bit " << bit << " flipped and the frame decoded";
        } catch (const net::AuthError& e) {
          ++auth;
          EXPECT_NE(std::string(e.what()).find("frame.tag: authentication failed"), std::string::npos) << e.what();
        } catch (const net::WireError&) {
        }
      }
    }
    // Flips in the tensor bytes and the tag can only be caught by the tag.
    EXPECT_GE(auth, 8 * (24 + 32 + 16)) << "tensor bytes and tag";
    // Another secret (the handshake's confirmation stops such a peer first: net_test): refused.
    EXPECT_THROW(decode(f, {}, "other-secret", p), net::WireError);
    EXPECT_THROW(decode(f.substr(0, f.size() - 16), {}, kSecret, p), net::AuthError);
    // A frame recorded on one connection replayed into another (other randoms, other keys).
    auto other = net::session_pair(kSecret, p);
    EXPECT_THROW(net::decode_frame(reinterpret_cast<const uint8_t*>(f.data()), f.size(), *other.second.rx, {}),
                 net::WireError);
  }
  EXPECT_THROW(decode(encode(sample()), {}, ""), std::invalid_argument);
}

// Within a connection each frame has its own nonce (the frame counter): a frame replayed, or two
// frames swapped, fail their tags.
TEST(Frame, AReplayedOrReorderedFrameIsRefused) {
  for (auto p : {net::Protection::Authenticated, net::Protection::Encrypted}) {
    SCOPED_TRACE(net::protection_name(p));
    auto [client, server] = net::session_pair(kSecret, p);
    const std::string first = net::encode_frame(sample(), *client.tx);
    const std::string second = net::encode_frame(sample(), *client.tx);
    auto open = [&](const std::string& f) {
      return net::decode_frame(reinterpret_cast<const uint8_t*>(f.data()), f.size(), *server.rx, {});
    };
    // Refused: an AuthError at the tag, or (encrypted: the bytes decrypt to noise under the wrong
    // nonce) a WireError at the first field the noise breaks; never a decoded frame.
    EXPECT_EQ(open(first).request_id, 77u);
    EXPECT_THROW(open(first), net::WireError);  // replayed: the receiver expects frame 2's nonce
    auto [c2, s2] = net::session_pair(kSecret, p);
    net::encode_frame(sample(), *c2.tx);  // frame 1, never delivered
    const std::string b = net::encode_frame(sample(), *c2.tx);
    EXPECT_THROW(net::decode_frame(reinterpret_cast<const uint8_t*>(b.data()), b.size(), *s2.rx, {}), net::WireError);
  }
}

// Encrypted, nothing after the header is in clear: not the meta, not the tensor bytes.
TEST(Frame, EncryptedFramesHideMetaAndTensorBytes) {
  net::Message m = sample();
  m.meta = R"({"secret-looking":"activations of the training data"})";
  const std::string clear = encode(m, net::Protection::Authenticated);
  const std::string sealed = encode(m, net::Protection::Encrypted);
  ASSERT_EQ(clear.size(), sealed.size());
  EXPECT_EQ(clear.substr(0, 40), sealed.substr(0, 40));  // the header is associated data
  EXPECT_NE(clear.find("activations of the training data"), std::string::npos);
  EXPECT_EQ(sealed.find("activations of the training data"), std::string::npos);
  const std::string data(reinterpret_cast<const char*>(m.tensors[1].data), m.tensors[1].nbytes);
  EXPECT_NE(clear.find(data), std::string::npos);
  EXPECT_EQ(sealed.find(data), std::string::npos);
  net::Message back = decode(sealed, {}, kSecret, net::Protection::Encrypted);
  EXPECT_EQ(back.meta, m.meta);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(std::memcmp(back.tensors[1].data, m.tensors[1].data, m.tensors[1].nbytes), 0);
}


TEST(Frame, EncodeRejectsInvalidMessages) {
  net::Message m = sample();
  m.tensors[1].nbytes = 31;
  try {
    encode(m);
    ADD_FAILURE();
  } catch (const net::WireError& e) {
    EXPECT_NE(std::string(e.what()).find("encode: tensor[1].nbytes"), std::string::npos) << e.what();
  }
  m = sample();
  m.tensors[0].dtype = static_cast<DType>(77);
  EXPECT_THROW(encode(m), net::WireError);
  m = sample();
  m.tensors[0].data = nullptr;
  EXPECT_THROW(encode(m), net::WireError);
}

TEST(Frame, FuzzNeverCrashes) {
  std::mt19937_64 rng(20240611);
  std::string valid = encode(sample());
  net::Limits lim;  // defaults: huge claimed sizes must fail before allocating
  int ok = 0, rejected = 0;
  for (int it = 0; it < 2000; ++it) {
    std::string f;
    switch (it % 4) {
      case 0: {  // pure noise
        f.resize(rng() % 600);
        for (char& c : f) c = static_cast<char>(rng());
        break;
      }
      case 1: {  // noise behind a valid magic and version
        f.resize(40 + rng() % 600);
        for (char& c : f) c = static_cast<char>(rng());
        std::memcpy(f.data(), valid.data(), 6);
        break;
      }
      case 2: {  // a valid frame with a few bytes flipped
        f = valid;
        for (int k = 0, n = 1 + rng() % 8; k < n; ++k) f[rng() % f.size()] = static_cast<char>(rng());
        break;
      }
      default: {  // a valid frame cut or extended
        f = valid.substr(0, rng() % valid.size());
        if (rng() % 2) f += std::string(rng() % 64, static_cast<char>(rng()));
      }
    }
    try {
      decode(f, lim);
      ++ok;
    } catch (const net::WireError&) {
      ++rejected;
    }
  }
  EXPECT_EQ(ok + rejected, 2000);
  EXPECT_GT(rejected, 1900);
}
