// Fuzz target: the safetensors reader (worker/checkpoint/safetensors.h) on one file's bytes, as
// `swarm eval` and `swarm generate` read an exported model and a worker a Hugging Face checkpoint
// someone hands them. Documented refusal: std::runtime_error. A header it accepts must describe
// the file: every tensor's bytes within the data, in offset order without overlap, their size the
// shape's element count times the dtype's size. A file it reads must hold what it returns: every
// tensor float32 and contiguous, of its entry's shape, the tensors together no larger than the
// data once 16-bit values are counted at their stored size.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "worker/checkpoint/safetensors.h"

using namespace swarm;

namespace {

void check_header(const runtime::SafetensorsHeader& h, size_t size) {
  if (h.data_start < 8 || h.data_start > size) fuzz::finding("data_start " + std::to_string(h.data_start) + " outside the file");
  const uint64_t data = size - h.data_start;
  uint64_t last_end = 0;
  for (const auto& e : h.tensors) {
    if (e.begin < last_end || e.begin > e.end || e.end > data) fuzz::finding("tensor " + e.name + "'s offsets are not its own");
    last_end = e.end;
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= static_cast<uint64_t>(d);
    if (numel * runtime::safetensors_dtype_size(e.dtype) != e.end - e.begin)
      fuzz::finding("tensor " + e.name + "'s bytes do not match its shape and dtype " + e.dtype);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  runtime::SafetensorsHeader h;
  try {
    h = runtime::parse_safetensors_header(bytes, size, "fuzz.safetensors");
  } catch (const std::runtime_error&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::unexpected("parse_safetensors_header", e);
  }
  check_header(h, size);
  runtime::TensorFile f;
  try {
    f = runtime::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const std::runtime_error&) {
    for (const auto& e : h.tensors)
      if (!runtime::safetensors_dtype_readable(e.dtype)) return 0;
    fuzz::finding("a header that parses, every dtype readable, was refused");
  } catch (const std::exception& e) {
    fuzz::unexpected("parse_safetensors", e);
  }
  if (f.tensors.size() != h.tensors.size()) fuzz::finding("tensors read differ in number from the header's");
  uint64_t total = 0;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const auto& [name, t] = f.tensors[i];
    if (t.scalar_type() != torch::kFloat || !t.is_contiguous())
      fuzz::finding("tensor " + name + " is not contiguous float32");
    if (name != h.tensors[i].name || t.sizes().vec() != h.tensors[i].shape)
      fuzz::finding("tensor " + name + " is not its header entry's shape");
    total += static_cast<uint64_t>(t.numel()) * runtime::safetensors_dtype_size(h.tensors[i].dtype);
  }
  if (total + 8 > size) fuzz::finding("the tensors hold " + std::to_string(total) + " bytes, more than the file's " + std::to_string(size));
  return 0;
}
