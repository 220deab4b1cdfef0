// Fuzz target: the HTTP/1.1 request parser (common/http_parser.h) that every byte an
// unauthenticated client sends the registry goes through first. The first input byte picks how
// the rest is cut into reads (1 to 256 bytes each); the parser gets small limits so that they are
// reached. Documented refusals: Failed with 400, 411, 413, 431, 501 or 505. A request it accepts
// must fit the limits and come from bytes it consumed; it may never take more bytes than offered,
// nor stop taking them while it needs more.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "common/http_parser.h"
#include "tests/fuzz/fuzz_util.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = static_cast<size_t>(data[0]) + 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const http::Limits limits{300, 200};
  http::RequestParser p(limits);
  static const std::set<int> refusals = {400, 411, 413, 431, 501, 505};
  size_t at = 0;
  while (at < input.size()) {
    const std::string_view piece = input.substr(at, step);
    const size_t used = p.feed(piece);
    if (used > piece.size()) fuzz::finding("feed took " + std::to_string(used) + " of " + std::to_string(piece.size()));
    at += used;
    if (p.status() == http::RequestParser::Status::NeedMore) {
      if (used != piece.size()) fuzz::finding("needs more but left " + std::to_string(piece.size() - used) + " bytes");
      continue;
    }
    if (p.status() == http::RequestParser::Status::Failed) {
      if (!refusals.count(p.refusal().status))
        fuzz::finding("refused with " + std::to_string(p.refusal().status) + ": " + p.refusal().message);
      break;
    }
    const http::Request r = p.take();
    if (r.body.size() > limits.max_body_bytes) fuzz::finding("a body of " + std::to_string(r.body.size()) + " bytes");
    if (r.method.empty() || r.path.empty()) fuzz::finding("a request without method or path");
    if (r.target.size() > limits.max_head_bytes) fuzz::finding("a target longer than the head limit");
  }
  return 0;
}
