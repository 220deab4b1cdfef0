#include "operator/api/quantity.h"

#include <cctype>
#include <cmath>
#include <map>
#include <stdexcept>

namespace swarm::op {

double parse_quantity(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("not a quantity: \"" + text + "\" (" + why + ")");
  };
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  const size_t digits = i;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == digits) throw bad("no number");
  double value;
  try {
    value = std::stod(text.substr(0, i));
  } catch (...) {
    throw bad("no number");
  }
  std::string suffix = text.substr(i);
  // A decimal exponent (1e3, 2E-2); a lone "E" is the exa suffix.
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E') &&
      (std::isdigit(static_cast<unsigned char>(suffix[1])) || suffix[1] == '+' || suffix[1] == '-')) {
    try {
      size_t used = 0;
      const int exp = std::stoi(suffix.substr(1), &used);
      if (used + 1 != suffix.size()) throw bad("trailing characters after the exponent");
      return value * std::pow(10.0, exp);
    } catch (const std::invalid_argument&) {
      throw bad("bad exponent");
    }
  }
  static const std::map<std::string, double> scale = {
      {"", 1},           {"n", 1e-9},       {"u", 1e-6},       {"m", 1e-3},       {"k", 1e3},
      {"M", 1e6},        {"G", 1e9},        {"T", 1e12},       {"P", 1e15},       {"E", 1e18},
      {"Ki", 1024.0},    {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"Pi", 1125899906842624.0}, {"Ei", 1152921504606846976.0}};
  auto it = scale.find(suffix);
  if (it == scale.end()) throw bad("unknown suffix \"" + suffix + "\"");
  return value * it->second;
}

}  // namespace swarm::op
