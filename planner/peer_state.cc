#include "planner/peer_state.h"

#include <stdexcept>

#include "common/json_quote.h"

namespace swarm::planner {
namespace {

// `s` as the registry's wire describes a value in its errors: a JSON string, cut to 80 characters.
std::string quoted(std::string_view s) {
  std::string out = json_quote(s);
  if (out.size() > 80) out = out.substr(0, 77) + "...";
  return out;
}

}  // namespace

const char* to_string(PeerState s) {
  switch (s) {
    case PeerState::Joining: return "joining";
    case PeerState::Serving: return "serving";
    case PeerState::Averaging: return "averaging";
    case PeerState::Draining: return "draining";
    case PeerState::Failed: return "failed";
  }
  return "unknown";
}

const std::string& peer_state_names() {
  static const std::string names = [] {
    std::string s;
    for (PeerState p : kPeerStates) s += (s.empty() ? "" : ", ") + std::string(to_string(p));
    return s;
  }();
  return names;
}

std::optional<PeerState> find_peer_state(std::string_view text) noexcept {
  for (PeerState p : kPeerStates) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

PeerState parse_peer_state(std::string_view text, std::string_view field) {
  if (auto s = find_peer_state(text)) return *s;
  throw std::invalid_argument(std::string(field) + ": must be one of " + peer_state_names() + ", got " +
                              quoted(text));
}

}  // namespace swarm::planner
