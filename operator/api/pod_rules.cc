#include "operator/api/pod_rules.h"

#include <cctype>
#include <cmath>
#include <map>
#include <stdexcept>

#include "common/job_spec.h"
#include "operator/api/quantity.h"

namespace swarm::op {
namespace {

using json = nlohmann::json;

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// 1..63 of [A-Za-z0-9-_.], starting and ending with a letter or digit.
bool is_label_name(std::string_view s) {
  if (s.empty() || s.size() > 63 || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  for (char c : s)
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

bool is_hugepages(std::string_view name) { return name.rfind("hugepages-", 0) == 0; }

bool is_container_resource(std::string_view name) {
  return name == "cpu" || name == "memory" || name == "ephemeral-storage" || is_hugepages(name) ||
         is_extended_resource(name);
}

// Extended resources and hugepages: the node hands out exactly what a pod asks for.
bool cannot_overcommit(std::string_view name) { return is_extended_resource(name) || is_hugepages(name); }

struct Amount {
  double value = 0;
  std::string text;  // as the user wrote it
};

// One of requests/limits: the entries that are valid, each problem in `errors`.
std::map<std::string, Amount> read_amounts(const json& list, const std::string& at, std::vector<std::string>& errors) {
  std::map<std::string, Amount> out;
  if (!list.is_object()) {
    errors.push_back(at + ": must be an object of quantities, got " + list.dump());
    return out;
  }
  for (const auto& [name, v] : list.items()) {
    const std::string field = at + "[" + name + "]";
    if (!is_container_resource(name)) {
      errors.push_back(field + ": must name a container resource (cpu, memory, ephemeral-storage, hugepages-<size>, "
                               "or an extended resource domain/name such as nvidia.com/gpu), got \"" + name + "\"");
      continue;
    }
    Amount a;
    if (v.is_number()) {
      a.value = v.get<double>();
      a.text = v.dump();
    } else if (v.is_string()) {
      a.text = v.get<std::string>();
      try {
        a.value = parse_quantity(a.text);
      } catch (const std::invalid_argument&) {
        errors.push_back(field + ": must be a Kubernetes quantity (e.g. 500m, 2, 1.5, 16Gi, 1e3), got \"" + a.text + "\"");
        continue;
      }
    } else {
      errors.push_back(field + ": must be a quantity (a string such as \"500m\", or an integer), got " + v.dump());
      continue;
    }
    if (a.value < 0) {
      errors.push_back(field + ": must not be negative, got " + a.text);
      continue;
    }
    if (is_extended_resource(name) && (!std::isfinite(a.value) || a.value != std::floor(a.value))) {
      errors.push_back(field + ": must be a whole number for an extended resource, got " + a.text);
      continue;
    }
    out.emplace(name, a);
  }
  return out;
}

// Quantities are compared as doubles: allow for the rounding of a decimal suffix (100m vs 0.1).
bool exceeds(double a, double b) { return a > b + std::fabs(b) * 1e-12; }
bool same(double a, double b) { return !exceeds(a, b) && !exceeds(b, a); }

}  // namespace

bool is_label_value(std::string_view s) { return s.empty() || is_label_name(s); }

bool is_label_key(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) return is_label_name(s);
  return is_dns1123_subdomain(s.substr(0, slash)) && is_label_name(s.substr(slash + 1));
}

bool is_extended_resource(std::string_view name) {
  return name.find('/') != std::string_view::npos && name.find("kubernetes.io/") == std::string_view::npos &&
         is_label_key(name);
}

std::vector<std::string> resource_problems(const json& resources, const std::string& path) {
  std::vector<std::string> errors;
  if (!resources.is_object()) {
    errors.push_back(path + ": must be an object with requests and limits, got " + resources.dump());
    return errors;
  }
  std::map<std::string, Amount> requests, limits;
  if (resources.contains("requests")) requests = read_amounts(resources["requests"], path + ".requests", errors);
  if (resources.contains("limits")) limits = read_amounts(resources["limits"], path + ".limits", errors);
  for (const auto& [name, request] : requests) {
    const std::string field = path + ".requests[" + name + "]";
    const auto limit = limits.find(name);
    const bool invalid_limit = limit == limits.end() && resources.contains("limits") &&
                               resources["limits"].is_object() && resources["limits"].contains(name);
    if (invalid_limit) continue;  // its own error already names it
    if (cannot_overcommit(name)) {
      if (limit == limits.end()) {
        errors.push_back(field + ": needs the same value in " + path + ".limits (extended resources and hugepages "
                                 "cannot be overcommitted), got " + request.text + " without a limit");
      } else if (!same(request.value, limit->second.value)) {
        errors.push_back(field + ": must equal " + path + ".limits[" + name + "] (" + limit->second.text +
                         "): extended resources and hugepages cannot be overcommitted, got " + request.text);
      }
    } else if (limit != limits.end() && exceeds(request.value, limit->second.value)) {
      errors.push_back(field + ": must not exceed " + path + ".limits[" + name + "] (" + limit->second.text + "), got " +
                       request.text);
    }
  }
  return errors;
}

}  // namespace swarm::op
