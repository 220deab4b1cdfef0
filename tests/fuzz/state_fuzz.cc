// Fuzz target: the model state decoder (worker/model/state.h, load_state), what a joining peer
// reads from a state download. The input is a flag byte and a blob (state_fixture.h); the seeds
// are save_state blobs of the tiny stage (make_seeds). Documented refusal: std::runtime_error.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/state_fixture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  swarm::fuzz::load_or_refuse(swarm::fuzz::state_blob(data, size));
  return 0;
}
