// What the job-spec tests share: a manifest's header, a manifest around a spec, and the errors a
// manifest is refused with.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/job_spec.h"

namespace swarm::spec_test {

inline const std::string kHeader =
    "apiVersion: swarm-operator.io/v1alpha1\n"
    "kind: SwarmJob\n"
    "metadata:\n"
    "  name: t\n";

// A manifest whose spec is `spec_flow`, a YAML flow mapping such as "{pipeline: {stages: 3}}".
inline std::string manifest(const std::string& spec_flow) { return kHeader + "spec: " + spec_flow + "\n"; }

// The errors parse_job_spec reports for `yaml`; fails the test when it parses.
inline std::vector<std::string> errors_of(const std::string& yaml) {
  try {
    parse_job_spec(yaml);
  } catch (const SpecError& e) {
    return e.errors();
  }
  ADD_FAILURE() << "parsed without error:\n" << yaml;
  return {};
}

}  // namespace swarm::spec_test
