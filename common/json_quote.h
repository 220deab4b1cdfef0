// A string as a JSON string literal (quoted and escaped; bytes >= 0x80 pass through), for error
// messages that name a bad value the way the wire would spell it. Header-only, so that code which
// links nothing (planner/, worker/net/) can use it.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace swarm {

inline std::string json_quote(std::string_view s) {
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
  return out + "\"";
}

}  // namespace swarm
