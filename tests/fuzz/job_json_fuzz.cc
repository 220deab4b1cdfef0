// Fuzz target: the SwarmJob JSON front end (common/job_spec_json.h, job_spec_from_json), how a
// spec reaches workers, trainers and the operator. The input is JSON text (parsed with nlohmann,
// whose parse_error is the caller's concern). Documented refusal: SpecError. A spec it accepts
// must pass validate_job_spec and encode back to itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "common/job_spec_json.h"
#include "tests/fuzz/fuzz_util.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json manifest = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded()) return 0;
  JobSpec spec;
  try {
    spec = job_spec_from_json(manifest);
  } catch (const SpecError& e) {
    if (e.errors().empty()) fuzz::finding("job_spec_from_json: a SpecError without a message");
    return 0;
  } catch (const std::exception& e) {
    fuzz::unexpected("job_spec_from_json", e);
  }
  if (!validate_job_spec(spec).empty()) {
    fuzz::finding("job_spec_from_json accepted a spec validate_job_spec refuses: " +
                  validate_job_spec(spec)[0]);
  }
  try {
    if (job_spec_from_json(to_json(spec)) != spec) fuzz::finding("the JSON round trip changes the spec");
  } catch (const std::exception& e) {
    fuzz::finding(std::string("job_spec_from_json refuses to_json of an accepted spec: ") + e.what());
  }
  return 0;
}
