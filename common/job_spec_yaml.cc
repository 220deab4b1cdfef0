// The YAML front end: YAML text -> JSON value (YAML 1.2 core schema) with the source position of
// every field, then the shared decoder and validator.
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "common/job_spec.h"
#include "common/job_spec_internal.h"

namespace swarm {
namespace {

using detail::Issues;
using detail::Location;
using nlohmann::json;

constexpr std::size_t kMaxBytes = 4 << 20;  // a manifest is a few KiB; Kubernetes caps at 1.5 MiB
constexpr std::size_t kMaxNodes = 20000;   // counted after aliases expand (no "billion laughs")
constexpr int kMaxDepth = 64;

std::optional<Location> location(const YAML::Mark& mark) {
  if (mark.is_null()) return std::nullopt;
  return Location{mark.line + 1, mark.column + 1};
}

bool is_digits(const std::string& s, std::size_t from, bool hex = false) {
  if (from >= s.size()) return false;
  for (std::size_t i = from; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (!(hex ? std::isxdigit(c) : std::isdigit(c))) return false;
  }
  return true;
}

// An unsigned magnitude parsed in `base`, as the narrowest JSON integer; nullopt on overflow.
std::optional<json> integer(const std::string& digits, int base, bool negative) {
  std::uint64_t u = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (!negative) {
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return json(static_cast<std::int64_t>(u));
    }
    return json(u);
  }
  if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1) {
    return json(static_cast<std::int64_t>(0 - u));  // two's complement: -u
  }
  return std::nullopt;
}

// [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE][-+]?[0-9]+ )?   (YAML 1.2 core float)
bool is_float_syntax(const std::string& s) {
  std::size_t i = 0, n = s.size();
  auto digits = [&] {
    std::size_t start = i;
    while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - start;
  };
  if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
  if (i < n && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < n && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == n;
}

// The value of an untagged plain scalar under the YAML 1.2 core schema: bool, int, float, or str.
json resolve_plain(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  const bool sign = s[0] == '-' || s[0] == '+';
  if (is_digits(s, sign ? 1 : 0)) {
    if (auto v = integer(s.substr(sign ? 1 : 0), 10, s[0] == '-')) return *v;
    // Beyond 64 bits: keep it as a number so that the message shows its magnitude.
    double d = 0;
    std::from_chars(s.data() + (sign ? 1 : 0), s.data() + s.size(), d);
    return s[0] == '-' ? -d : d;
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    const bool hex = s[1] == 'x';
    if (is_digits(s, 2, hex) && (hex || s.find_first_of("89") == std::string::npos)) {
      if (auto v = integer(s.substr(2), hex ? 16 : 8, false)) return *v;
    }
  }
  const std::string rest = sign ? s.substr(1) : s;
  if (rest == ".inf" || rest == ".Inf" || rest == ".INF") return s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  if (!sign && (s == ".nan" || s == ".NaN" || s == ".NAN")) return std::nan("");
  if (is_float_syntax(s)) {
    double d = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), d);
    if (ec == std::errc::result_out_of_range) d = HUGE_VAL;  // 1e999; underflow is rare enough
    if (ec == std::errc() || ec == std::errc::result_out_of_range) return s[0] == '-' ? -d : d;
  }
  return s;
}

// Converts a parsed YAML document to JSON, recording where each field is and reporting what JSON
// cannot express (duplicate or non-string keys).
class Converter {
 public:
  Converter(Issues& issues, std::map<std::string, Location>& where)
      : issues_(issues), where_(where) {}

  struct TooLarge {
    std::string message;
  };

  json convert(const YAML::Node& node, const std::string& path, int depth) {
    if (++nodes_ > kMaxNodes) {
      throw TooLarge{"the document has more than " + std::to_string(kMaxNodes) +
                     " values (counting expanded aliases)"};
    }
    if (depth > kMaxDepth) {
      throw TooLarge{(path.empty() ? std::string() : path + ": ") + "nested deeper than " +
                     std::to_string(kMaxDepth) + " levels"};
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        // Quoted ("!") or !!str-tagged scalars are strings; plain ones are resolved.
        if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return node.Scalar();
        return resolve_plain(node.Scalar());
      case YAML::NodeType::Sequence: {
        json out = json::array();
        std::size_t i = 0;
        for (auto it = node.begin(); it != node.end(); ++it) {
          const YAML::Node item = *it;
          std::string child = detail::index_path(path, i++);
          if (auto loc = location(item.Mark())) where_.emplace(child, *loc);
          out.push_back(convert(item, child, depth + 1));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        json out = json::object();
        for (auto it = node.begin(); it != node.end(); ++it) {
          // Copies: the iterator hands out a temporary pair.
          const YAML::Node key = it->first;
          const YAML::Node value = it->second;
          if (!key.IsScalar()) {
            const char* what = key.IsMap() ? "mapping" : key.IsSequence() ? "list" : "null";
            issues_.add(path, std::string("keys must be strings, got a ") + what + " as a key",
                        location(key.Mark()));
            continue;
          }
          std::string child = detail::join_path(path, key.Scalar());
          if (out.contains(key.Scalar())) {
            issues_.add(child, "duplicate key", location(key.Mark()));
            continue;
          }
          if (auto loc = location(key.Mark())) where_.emplace(child, *loc);
          out[key.Scalar()] = convert(value, child, depth + 1);
        }
        return out;
      }
      default:  // Null, Undefined
        return nullptr;
    }
  }

 private:
  Issues& issues_;
  std::map<std::string, Location>& where_;
  std::size_t nodes_ = 0;
};

std::string with_location(const std::string& message, const YAML::Mark& mark) {
  auto loc = location(mark);
  if (!loc) return message;
  return message + " (line " + std::to_string(loc->line) + ", column " +
         std::to_string(loc->column) + ")";
}

// Records where each document of a stream starts; ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// YAML::LoadAll, except that a stream the parser makes no progress on is a syntax error instead of
// a hang: yaml-cpp 0.7 reads a stray "," as an endless series of empty documents, each starting
// where the last one did. A first pass over the events finds that before any node is built.
std::vector<YAML::Node> load_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts docs;
  while (parser.HandleNextDocument(docs)) {
    const size_t n = docs.starts.size();
    if (n >= 2 && docs.starts[n - 1].pos <= docs.starts[n - 2].pos) {
      throw YAML::ParserException(docs.starts[n - 1],
                                  "no document can start here (a ',' outside [ ] or { }?)");
    }
  }
  return YAML::LoadAll(text);
}

JobSpec parse(const std::string& text, const std::string& source) {
  if (text.size() > kMaxBytes) {
    throw SpecError({"the document is larger than " + std::to_string(kMaxBytes >> 20) + " MiB"},
                    source);
  }
  std::vector<YAML::Node> docs;
  try {
    for (const YAML::Node& doc : load_documents(text)) {
      if (!doc.IsNull()) docs.push_back(doc);  // a trailing "---" yields an empty document
    }
  } catch (const YAML::Exception& e) {
    throw SpecError({with_location("YAML syntax error: " + e.msg, e.mark)}, source);
  }
  if (docs.empty()) throw SpecError({"the document is empty"}, source);
  if (docs.size() > 1) {
    throw SpecError({"expected one YAML document, got " + std::to_string(docs.size()) +
                     " (separated by ---)"},
                    source);
  }

  Issues issues;
  std::map<std::string, Location> where;
  json doc;
  try {
    doc = Converter(issues, where).convert(docs.front(), "", 0);
  } catch (const Converter::TooLarge& e) {
    throw SpecError({e.message}, source);
  }
  return detail::decode_and_validate(doc, issues, where, source);
}

}  // namespace

JobSpec parse_job_spec(const std::string& yaml_text) { return parse(yaml_text, {}); }

JobSpec load_job_spec(const std::string& path) {
  const std::string what = "cannot read " + detail::quote(path) + ": ";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw SpecError(what + "it is a directory");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw SpecError(what + (errno ? std::generic_category().message(errno) : "cannot open it"));
  }
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes) break;  // parse() reports it
  }
  if (in.bad()) throw SpecError(what + std::generic_category().message(errno));
  return parse(text, path);
}

}  // namespace swarm
