#include "common/process_memory.h"

#include <fstream>
#include <sstream>

namespace swarm {
namespace {

std::optional<int64_t> own_status_field(const std::string& name) {
  std::ifstream in("/proc/self/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return status_kib_field_bytes(text.str(), name);
}

}  // namespace

std::optional<int64_t> status_kib_field_bytes(const std::string& status_text, const std::string& name) {
  std::istringstream in(status_text);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, name.size() + 1, name + ":") != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    int64_t kib = -1;
    std::string unit;
    if (!(fields >> kib >> unit) || kib < 0 || unit != "kB") return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> resident_bytes() { return own_status_field("VmRSS"); }
std::optional<int64_t> peak_resident_bytes() { return own_status_field("VmHWM"); }

}  // namespace swarm
