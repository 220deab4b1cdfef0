// Fuzz target: the SwarmJob YAML front end (common/job_spec.h, parse_job_spec). The input is a
// manifest; the seeds are examples/*.yaml. Documented refusal: SpecError, each message starting
// with a field path. A spec it accepts must pass validate_job_spec and survive the JSON round trip
// (job_spec_from_json(to_json(spec)) == spec).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/job_spec.h"
#include "common/job_spec_json.h"
#include "tests/fuzz/job_spec_check.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::check_job_spec_front_end("parse_job_spec", [&] { return parse_job_spec(text); });
  return 0;
}
