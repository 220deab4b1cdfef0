// Internals shared by the job_spec*.cc files; not part of the public API.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"

namespace swarm::detail {

// A 1-based position in the source text.
struct Location {
  int line = 0;
  int column = 0;
};

struct Issue {
  std::string path;  // "spec.pipeline.stages"; empty for document-level problems
  std::string message;
  std::optional<Location> location;
};

// The problems found so far. `failed` holds the paths whose value could not be decoded (wrong
// type, missing required field); validation skips rules on those and everything below them, so one
// mistake yields one message.
class Issues {
 public:
  void add(std::string path, std::string message, std::optional<Location> loc = std::nullopt);
  // add() and remember `path` as failed.
  void fail(const std::string& path, std::string message);
  bool failed(const std::string& path) const;
  bool empty() const { return list_.empty(); }
  const std::vector<Issue>& list() const { return list_; }

  // "path: message (line L, column C)", ordered by position where known. `where` maps paths to
  // their position in the source (YAML) and may be empty.
  std::vector<std::string> format(const std::map<std::string, Location>& where = {}) const;

 private:
  std::vector<Issue> list_;
  std::vector<std::string> failed_;
};

// "a.b" + "c" -> "a.b.c"; keys that are not plain identifiers become a.b["x.y"].
std::string join_path(const std::string& parent, const std::string& key);
std::string index_path(const std::string& parent, std::size_t index);

// How a value is shown after "got": strings quoted, long values cut, .inf/.nan spelled as in YAML.
std::string describe(const nlohmann::json& value);
std::string describe_number(double value);
std::string quote(const std::string& s);

// Decodes a SwarmJob document (already in JSON form) into `out`, which starts at the defaults.
// Type errors, unknown fields and missing required fields go to `issues`.
void decode_job_spec(const nlohmann::json& doc, JobSpec& out, Issues& issues);

// Applies every validation rule to `spec`, skipping rules on paths `issues` marks as failed.
void validate_job_spec(const JobSpec& spec, Issues& issues);

// decode + validate; throws SpecError (with `where` positions and `source`) on any issue.
JobSpec decode_and_validate(const nlohmann::json& doc, Issues& issues,
                            const std::map<std::string, Location>& where,
                            const std::string& source);

}  // namespace swarm::detail
