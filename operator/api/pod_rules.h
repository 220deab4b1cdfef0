// The rules the API server applies to the pods the operator makes from a SwarmJob (label keys and
// values of their nodeSelector, their container's resources), checked on the SwarmJob itself: a
// job the API server would never give pods is refused with the field that is wrong, instead of
// sitting Pending. The CRD (crds/) carries the same rules as CEL; these are the second line, for
// objects stored under an older CRD. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace swarm::op {

// A label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending with a
// letter or digit.
bool is_label_value(std::string_view s);
// A label key: [DNS-1123 subdomain '/'] name, the name 1 to 63 letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit. Extended resource names have this form too.
bool is_label_key(std::string_view s);
// A resource a device plugin or the cluster adds (nvidia.com/gpu): a domain-qualified name outside
// kubernetes.io. The API server wants whole numbers of it, and requests equal to limits.
bool is_extended_resource(std::string_view name);

// What is wrong with a container's {requests, limits} (`resources`, at field path `path`), one
// "field: message, got value" each: unknown resource names, values that are not Kubernetes
// quantities or are negative, fractional extended resources, requests above limits, and extended
// resources or hugepages requested without an equal limit.
std::vector<std::string> resource_problems(const nlohmann::json& resources, const std::string& path);

}  // namespace swarm::op
