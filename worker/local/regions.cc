#include "worker/local/regions.h"

#include <algorithm>
#include <stdexcept>

#include "registry/wire.h"

namespace swarm::runtime {

std::vector<std::string> parse_regions(const std::string& list) {
  std::vector<std::string> out;
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("--regions: " + why + " (names like a,b or eu-west-1,us-east-1), got \"" + list + "\"");
  };
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty() || !registry::wire::valid_region(name))
      throw bad("each region is 1 to 63 characters of [A-Za-z0-9._-]");
    if (std::find(out.begin(), out.end(), name) != out.end()) throw bad("region \"" + name + "\" is named twice");
    out.push_back(name);
    if (out.size() > 64) throw bad("at most 64 regions");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string region_of(const std::vector<std::string>& regions, int64_t index) {
  if (regions.empty() || index < 0) return "";
  return regions[static_cast<size_t>(index % static_cast<int64_t>(regions.size()))];
}

std::string JoinerRegions::next() {
  const int64_t index = joiners_++;
  if (lost_.empty()) return region_of(regions_, index);
  std::string region = std::move(lost_.front());
  lost_.pop_front();
  return region;
}

}  // namespace swarm::runtime
