#include "common/s3_url.h"

#include <stdexcept>

namespace swarm {
namespace {

bool bucket_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'; }
bool alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::optional<std::string> split(const std::string& url, S3Url& out) {
  const std::string quoted = "\"" + url + "\"";
  if (!is_s3_url(url)) return "must start with s3://, got " + quoted;
  std::string rest = url.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto slash = rest.find('/');
  out.bucket = rest.substr(0, slash);
  out.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  const std::string& b = out.bucket;
  if (b.size() < 3 || b.size() > 63)
    return "bucket must have 3 to 63 characters, got \"" + b + "\" in " + quoted;
  for (char c : b)
    if (!bucket_char(c))
      return "bucket may hold lowercase letters, digits, '.' and '-' only, got \"" + b + "\" in " + quoted;
  if (!alnum_lower(b.front()) || !alnum_lower(b.back()))
    return "bucket must start and end with a letter or digit, got \"" + b + "\" in " + quoted;
  if (out.prefix.size() > 900) return "prefix is longer than 900 bytes in " + quoted;
  for (char c : out.prefix)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "prefix holds a control character in " + quoted;
  size_t start = 0;
  while (!out.prefix.empty() && start <= out.prefix.size()) {
    const auto end = out.prefix.find('/', start);
    const std::string seg = out.prefix.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (seg.empty() || seg == "." || seg == "..")
      return "prefix has an empty, \".\" or \"..\" segment in " + quoted;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> s3_url_problem(const std::string& url) {
  S3Url u;
  return split(url, u);
}

S3Url parse_s3_url(const std::string& url) {
  S3Url u;
  if (auto why = split(url, u)) throw std::invalid_argument("s3 location: " + *why);
  return u;
}

}  // namespace swarm
