// Fuzz target: the wire frame decoder (worker/net/frame.h, decode_frame) and the decoder of an
// Error message's meta (worker/net/message.h, decode_error). The input is a protection byte and one
// frame, opened as the first frame of a fixed session (fuzz_util.h); the seeds (corpus/frame,
// written by make_seeds with encode_frame) are valid frames of both protections. Every field is
// parsed before the tag is checked, so mutations reach the whole decoder. Documented refusals:
// WireError (AuthError is one).
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "worker/net/errors.h"
#include "worker/net/frame.h"
#include "worker/net/message.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    const auto p = (data[0] & 1) ? net::Protection::Encrypted : net::Protection::Authenticated;
    net::Session session = fuzz::frame_session(false, p);
    net::Message m = net::decode_frame(data + 1, size - 1, *session.rx, net::Limits{});
    if (m.tensors.size() > net::Limits{}.max_tensors) {
      fuzz::finding("decode_frame: more tensors than max_tensors");
    }
  } catch (const net::WireError&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("decode_frame", e);
  }
  // The same bytes as the meta of an Error message (meta is covered by the tag, so a mutated
  // frame never gets this far with a meta of its own).
  net::Message error;
  error.type = net::Error;
  error.meta.assign(reinterpret_cast<const char*>(data), size);
  try {
    net::decode_error(error);
  } catch (const net::WireError&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("decode_error", e);
  }
  return 0;
}
