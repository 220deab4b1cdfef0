// s3://BUCKET[/PREFIX] locations (spec.checkpoint.path, swarm export --from/--out): parsed and
// checked in one place, for the spec's validation and for the object-storage client.
#pragma once

#include <optional>
#include <string>

namespace swarm {

struct S3Url {
  std::string bucket;
  std::string prefix;  // without leading or trailing '/'; "" = the bucket's root

  // The object key of `name` under the prefix ("prefix/name", or "name" at the root).
  std::string key(const std::string& name) const { return prefix.empty() ? name : prefix + "/" + name; }
  // s3://bucket/key
  std::string url_of(const std::string& key) const { return "s3://" + bucket + "/" + key; }
};

inline bool is_s3_url(const std::string& s) { return s.rfind("s3://", 0) == 0; }

// Why `url` is not a usable s3://BUCKET[/PREFIX] (bucket: 3-63 lowercase letters, digits, '.'
// and '-', starting and ending with a letter or digit; prefix: no empty, "." or ".." segment, no
// control characters, at most 900 bytes), or nullopt.
std::optional<std::string> s3_url_problem(const std::string& url);

// Throws std::invalid_argument with s3_url_problem's message.
S3Url parse_s3_url(const std::string& url);

}  // namespace swarm
