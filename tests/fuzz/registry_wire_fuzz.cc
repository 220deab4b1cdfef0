// Fuzz target: the registry's JSON body decoders (registry/wire.h) — the ones the service reads
// requests with and the ones its client reads replies with (progress, group). The input is one
// body. Documented refusal: BadField. Whatever a decoder accepts must survive a round trip: its
// to_json decodes again to the same JSON (a value the registry accepts but cannot write back, or
// reads back differently, is a finding).
#include <cstddef>
#include <cstdint>
#include <string>

#include "registry/wire.h"
#include "tests/fuzz/fuzz_util.h"

using namespace swarm;
using registry::wire::json;

namespace {

template <class Decode>
void round_trip(const char* name, const json& body, Decode decode) {
  json once;
  try {
    once = registry::wire::to_json(decode(body));
  } catch (const registry::wire::BadField&) {
    return;
  } catch (const std::exception& e) {
    fuzz::unexpected(name, e);
  }
  try {
    json twice = registry::wire::to_json(decode(once));
    if (twice != once) {
      fuzz::finding(std::string(name) + ": " + once.dump() + " reads back as " + twice.dump());
    }
  } catch (const std::exception& e) {
    fuzz::finding(std::string(name) + " refuses its own encoding " + once.dump() + ": " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json body;
  try {
    body = registry::wire::parse_object(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const registry::wire::BadField&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::unexpected("parse_object", e);
  }
  round_trip("peer_from_json", body, [](const json& j) { return registry::wire::peer_from_json(j); });
  round_trip("member_from_json", body, [](const json& j) { return registry::wire::member_from_json(j); });
  round_trip("progress_from_json", body, [](const json& j) { return registry::wire::progress_from_json(j); });
  round_trip("group_from_json", body, [](const json& j) { return registry::wire::group_from_json(j); });
  return 0;
}
