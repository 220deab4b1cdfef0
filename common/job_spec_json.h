// The SwarmJob spec as JSON: how the spec travels to workers and trainers (command line, HTTP) and
// how the Kubernetes API server hands the custom resource to the operator.
#pragma once

#include <nlohmann/json.hpp>

#include "common/job_spec.h"

namespace swarm {

// The whole manifest {apiVersion, kind, metadata: {name, namespace}, spec: {...}} with every field
// present (defaults included) under the same camelCase keys as the YAML; secretRef only when set.
// job_spec_from_json(to_json(s)) == s for every valid s.
nlohmann::json to_json(const JobSpec& spec);

// Decodes a manifest in that shape (missing fields take their defaults, `status` and the metadata
// Kubernetes adds are ignored) and applies the same validation as parse_job_spec. Throws SpecError.
JobSpec job_spec_from_json(const nlohmann::json& manifest);

// nlohmann's ADL hooks, so `nlohmann::json j = spec;` and `j.get<swarm::JobSpec>()` work too.
void to_json(nlohmann::json& out, const JobSpec& spec);
void from_json(const nlohmann::json& in, JobSpec& spec);

}  // namespace swarm
