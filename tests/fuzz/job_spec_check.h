// What both job-spec targets check (job_yaml_fuzz.cc, job_json_fuzz.cc): `decode` (a front end
// given the input) either refuses with a SpecError that names something, or returns a spec that
// validate_job_spec accepts and that survives the JSON round trip.
#pragma once

#include <exception>
#include <string>

#include "common/job_spec.h"
#include "common/job_spec_json.h"
#include "tests/fuzz/fuzz_util.h"

namespace swarm::fuzz {

template <class Decode>
void check_job_spec_front_end(const char* name, Decode decode) {
  JobSpec spec;
  try {
    spec = decode();
  } catch (const SpecError& e) {
    if (e.errors().empty()) finding(std::string(name) + ": a SpecError without a message");
    return;
  } catch (const std::exception& e) {
    unexpected(name, e);
  }
  if (!validate_job_spec(spec).empty())
    finding(std::string(name) + " accepted a spec validate_job_spec refuses: " + validate_job_spec(spec)[0]);
  try {
    if (job_spec_from_json(to_json(spec)) != spec) finding("the JSON round trip changes the spec");
  } catch (const std::exception& e) {
    finding(std::string("job_spec_from_json refuses to_json of an accepted spec: ") + e.what());
  }
}

}  // namespace swarm::fuzz
