// The strict field reader the SwarmJob decoders share (common/job_spec_json.cc and
// common/job_spec_model.cc); not part of the public API.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec_internal.h"

namespace swarm::detail {

// The known field a misspelt `key` most likely meant, or "".
std::string suggestion(const std::string& key, const std::vector<std::string>& known);

// Reads the fields of one JSON object at `path`, type-checking each, and reports the keys nobody
// asked for as unknown in finish(). An absent or null object reads as all defaults.
class Reader {
  using json = nlohmann::json;

 public:
  Reader(Issues& issues, const json* value, std::string path, bool required = false)
      : issues_(issues), path_(std::move(path)) {
    if (value == nullptr || value->is_null()) {
      if (required) issues_.fail(path_, "required");
    } else if (!value->is_object()) {
      issues_.fail(path_, "expected an object, got " + describe(*value));
    } else {
      object_ = value;
    }
  }

  Reader object(const char* key, bool required = false) {
    return Reader(issues_, field(key), join_path(path_, key), required && object_ != nullptr);
  }

  void ignore(const char* key) { field(key); }
  // Accepts `key` unread and appends its path to `seen` when present.
  void ignore(const char* key, std::vector<std::string>& seen) {
    if (field(key) != nullptr) seen.push_back(join_path(path_, key));
  }

  void get(const char* key, std::string& out, bool required = false) {
    if (const json* v = field(key, required)) {
      if (v->is_string()) {
        out = v->get<std::string>();
      } else {
        fail(key, "expected a string, got " + describe(*v));
      }
    }
  }

  void get(const char* key, bool& out) {
    if (const json* v = field(key)) {
      if (v->is_boolean()) {
        out = v->get<bool>();
      } else {
        fail(key, "expected a boolean (true or false), got " + describe(*v));
      }
    }
  }

  // A boolean that may be left out (out stays nullopt).
  void get(const char* key, std::optional<bool>& out) {
    const json* v = field(key);
    if (v == nullptr) return;
    if (v->is_boolean()) {
      out = v->get<bool>();
    } else {
      fail(key, "expected a boolean (true or false), got " + describe(*v));
    }
  }

  void get(const char* key, double& out) {
    if (const json* v = field(key)) {
      if (v->is_number()) {
        out = v->get<double>();
      } else {
        fail(key, "expected a number, got " + describe(*v));
      }
    }
  }

  void get(const char* key, std::int64_t& out) {
    const json* v = field(key);
    if (v == nullptr) return;
    if (v->is_number_integer() && !v->is_number_unsigned()) {
      out = v->get<std::int64_t>();
    } else if (v->is_number_unsigned() && v->get<std::uint64_t>() <= INT64_MAX) {
      out = static_cast<std::int64_t>(v->get<std::uint64_t>());
    } else if (v->is_number_float() && whole(v->get<double>()) &&
               std::fabs(v->get<double>()) < 9.2e18) {
      out = static_cast<std::int64_t>(v->get<double>());
    } else if (v->is_number() && (!v->is_number_float() || whole(v->get<double>()))) {
      fail(key, "integer out of range, got " + describe(*v));
    } else {
      fail(key, "expected an integer, got " + describe(*v));
    }
  }

  void get(const char* key, std::uint64_t& out) {
    const json* v = field(key);
    if (v == nullptr) return;
    if (v->is_number_unsigned()) {
      out = v->get<std::uint64_t>();
    } else if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
      out = static_cast<std::uint64_t>(v->get<std::int64_t>());
    } else if (v->is_number_float() && whole(v->get<double>()) && v->get<double>() >= 0 &&
               v->get<double>() < 1.8e19) {
      out = static_cast<std::uint64_t>(v->get<double>());
    } else if (v->is_number() && (!v->is_number_float() || whole(v->get<double>()))) {
      fail(key, "must be an integer in [0, 18446744073709551615], got " + describe(*v));
    } else {
      fail(key, "expected an integer, got " + describe(*v));
    }
  }

  template <class E>
  void get_enum(const char* key, E& out, std::optional<E> (*parse)(std::string_view), const char* choices) {
    if (auto e = read_enum(key, parse, choices)) out = *e;
  }

  // An enum that may be left out (out stays nullopt).
  template <class E>
  void get_enum(const char* key, std::optional<E>& out, std::optional<E> (*parse)(std::string_view),
                const char* choices) {
    if (auto e = read_enum(key, parse, choices)) out = e;
  }

  // A list of exactly two numbers, e.g. betas: [0.9, 0.95].
  void get_pair(const char* key, double& first, double& second) {
    const json* v = field(key);
    if (v == nullptr) return;
    if (!v->is_array() || v->size() != 2) {
      fail(key, "expected a list of two numbers, got " + describe(*v));
      return;
    }
    const std::string path = join_path(path_, key);
    double* out[2] = {&first, &second};
    for (std::size_t i = 0; i < 2; ++i) {
      if ((*v)[i].is_number()) {
        *out[i] = (*v)[i].get<double>();
      } else {
        issues_.fail(index_path(path, i), "expected a number, got " + describe((*v)[i]));
      }
    }
  }

  // A list of integers, e.g. layersPerStage: [3, 4, 3]. `out` is left alone unless every entry
  // is an integer.
  void get_list(const char* key, std::vector<std::int64_t>& out) {
    const json* v = field(key);
    if (v == nullptr) return;
    if (!v->is_array()) {
      fail(key, "expected a list of integers, got " + describe(*v));
      return;
    }
    const std::string path = join_path(path_, key);
    std::vector<std::int64_t> values;
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (e.is_number_integer() && (!e.is_number_unsigned() || e.get<std::uint64_t>() <= INT64_MAX)) {
        values.push_back(e.is_number_unsigned() ? static_cast<std::int64_t>(e.get<std::uint64_t>())
                                                : e.get<std::int64_t>());
      } else if (e.is_number_float() && whole(e.get<double>()) && std::fabs(e.get<double>()) < 9.2e18) {
        values.push_back(static_cast<std::int64_t>(e.get<double>()));
      } else {
        issues_.fail(index_path(path, i), "expected an integer, got " + describe(e));
      }
    }
    if (values.size() == v->size()) out = std::move(values);
  }

  // Whether `key` is given (present and not null); does not count as reading it.
  bool present(const char* key) const {
    if (object_ == nullptr) return false;
    auto it = object_->find(key);
    return it != object_->end() && !it->is_null();
  }

  // An object whose values are all strings (labels, annotations); checked, then dropped.
  void string_map(const char* key) {
    const json* v = field(key);
    if (v == nullptr) return;
    const std::string path = join_path(path_, key);
    if (!v->is_object()) {
      issues_.fail(path, "expected an object of strings, got " + describe(*v));
      return;
    }
    for (const auto& item : v->items()) {
      if (!item.value().is_string()) {
        issues_.fail(join_path(path, item.key()),
                     "expected a string, got " + describe(item.value()));
      }
    }
  }

  // Reports every key that no getter asked for.
  void finish() {
    if (object_ == nullptr) return;
    for (const auto& item : object_->items()) {
      if (std::find(known_.begin(), known_.end(), item.key()) != known_.end()) continue;
      std::string message = "unknown field";
      std::string guess = suggestion(item.key(), known_);
      if (!guess.empty()) message += " (did you mean " + guess + "?)";
      message += "; allowed:";
      for (std::size_t i = 0; i < known_.size(); ++i) message += (i ? ", " : " ") + known_[i];
      issues_.fail(join_path(path_, item.key()), message);
    }
  }

 private:
  // `key`'s value spelled as one of `choices`; nullopt when absent or (with an issue) misspelled.
  template <class E>
  std::optional<E> read_enum(const char* key, std::optional<E> (*parse)(std::string_view), const char* choices) {
    const json* v = field(key);
    if (v == nullptr) return std::nullopt;
    std::optional<E> e;
    if (v->is_string()) e = parse(v->get<std::string>());
    if (!e) fail(key, std::string("must be one of ") + choices + ", got " + describe(*v));
    return e;
  }

  static bool whole(double x) { return std::isfinite(x) && x == std::trunc(x); }

  const json* field(const char* key, bool required = false) {
    known_.emplace_back(key);
    if (object_ == nullptr) return nullptr;
    auto it = object_->find(key);
    if (it == object_->end() || it->is_null()) {
      if (required) issues_.fail(join_path(path_, key), "required");
      return nullptr;
    }
    return &*it;
  }

  void fail(const char* key, std::string message) {
    issues_.fail(join_path(path_, key), std::move(message));
  }

  Issues& issues_;
  std::string path_;
  const json* object_ = nullptr;
  std::vector<std::string> known_;
};

// spec.model and spec.pipeline (common/job_spec_model.cc): decoded from `spec`'s reader, and
// their to_json sections.
void decode_model(Reader& spec, ModelSpec& out);
void decode_pipeline(Reader& spec, PipelineSpec& out);
nlohmann::json model_json(const ModelSpec& m);
nlohmann::json pipeline_json(const PipelineSpec& p);

}  // namespace swarm::detail
