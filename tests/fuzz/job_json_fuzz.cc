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
#include "tests/fuzz/job_spec_check.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json manifest = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded()) return 0;
  fuzz::check_job_spec_front_end("job_spec_from_json", [&] { return job_spec_from_json(manifest); });
  return 0;
}
