// Fuzz target: the SwarmJob YAML front end (common/job_spec.h, parse_job_spec). The input is a
// manifest; the seeds are examples/*.yaml. Documented refusal: SpecError, each message starting
// with a field path. A spec it accepts must pass validate_job_spec and survive the JSON round trip
// (job_spec_from_json(to_json(spec)) == spec).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/job_spec.h"
#include "common/job_spec_json.h"
#include "tests/fuzz/fuzz_util.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  JobSpec spec;
  try {
    spec = parse_job_spec(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const SpecError& e) {
    if (e.errors().empty()) fuzz::finding("parse_job_spec: a SpecError without a message");
    return 0;
  } catch (const std::exception& e) {
    fuzz::unexpected("parse_job_spec", e);
  }
  if (!validate_job_spec(spec).empty()) {
    fuzz::finding("parse_job_spec accepted a spec validate_job_spec refuses: " +
                  validate_job_spec(spec)[0]);
  }
  try {
    if (job_spec_from_json(to_json(spec)) != spec) fuzz::finding("the JSON round trip changes the spec");
  } catch (const std::exception& e) {
    fuzz::finding(std::string("job_spec_from_json refuses to_json of an accepted spec: ") + e.what());
  }
  return 0;
}
