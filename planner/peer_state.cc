#include "planner/peer_state.h"

#include <cstdio>
#include <stdexcept>

namespace swarm::planner {
namespace {

// `s` as a JSON string literal, as the registry's wire describes a value in its errors (quoted,
// escaped, cut to 80 characters).
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
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
