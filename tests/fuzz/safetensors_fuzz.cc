// Fuzz target: the safetensors reader (worker/checkpoint/safetensors.h) on one file's bytes, as
// `swarm eval` and `swarm generate` read an exported model someone hands them. Documented refusal:
// std::runtime_error. A file it accepts must hold what it returns: every tensor F32 and
// contiguous, its bytes within the file's data, the tensors together no larger than the data
// (they may not overlap).
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "worker/checkpoint/safetensors.h"

using namespace swarm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  runtime::TensorFile f;
  try {
    f = runtime::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const std::runtime_error&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::unexpected("parse_safetensors", e);
  }
  uint64_t total = 0;
  for (const auto& [name, t] : f.tensors) {
    if (t.scalar_type() != torch::kFloat || !t.is_contiguous())
      fuzz::finding("tensor " + name + " is not contiguous float32");
    total += static_cast<uint64_t>(t.numel()) * sizeof(float);
  }
  if (total + 8 > size) fuzz::finding("the tensors hold " + std::to_string(total) + " bytes, more than the file's " + std::to_string(size));
  return 0;
}
