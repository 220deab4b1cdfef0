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
  // [0-9]+(.[0-9]*)? or .[0-9]+, as the API server reads them ("1.2.3" is no number).
  size_t digits = 0, dots = 0;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i)
    ++(text[i] == '.' ? dots : digits);
  if (digits == 0) throw bad("no number");
  if (dots > 1) throw bad("more than one decimal point");
  double value;
  try {
    value = std::stod(text.substr(0, i));
  } catch (...) {
    throw bad("no number");
  }
  std::string suffix = text.substr(i);
  // A decimal exponent (1e3, 2E-2); a lone "E" is the exa suffix. At most 3 digits, as the CRD
  // wants (the API server's own parser takes half a minute over 1e99999999999).
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E') &&
      (std::isdigit(static_cast<unsigned char>(suffix[1])) || suffix[1] == '+' || suffix[1] == '-')) {
    const size_t first = suffix[1] == '+' || suffix[1] == '-' ? 2 : 1;
    const std::string exp = suffix.substr(first);
    if (exp.empty()) throw bad("bad exponent");
    for (char c : exp)
      if (!std::isdigit(static_cast<unsigned char>(c))) throw bad("trailing characters after the exponent");
    if (exp.size() > 3) throw bad("exponent of more than 3 digits");
    const int e = std::stoi(exp);
    return value * std::pow(10.0, suffix[1] == '-' ? -e : e);
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
