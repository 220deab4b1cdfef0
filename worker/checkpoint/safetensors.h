// safetensors files (the format Hugging Face and PyTorch tools load): an 8-byte little-endian
// header length N, N bytes of JSON {"__metadata__": {string: string}, NAME: {"dtype": "F32",
// "shape": [...], "data_offsets": [begin, end]}...} (padded with spaces to a multiple of 8), then
// the tensors' bytes, little-endian, row-major, in the order of their offsets.
//
// Written and read here for float32 tensors (F32), the dtype export writes. Reading checks the
// whole header against the file before it allocates anything: a bad length, JSON that is not an
// object, an unknown dtype, a dimension that is negative or not an integer, a shape whose product
// (or byte size) would overflow int64, a shape whose size does not match its offsets, offsets
// outside the data or overlapping another tensor's: each refused with std::runtime_error naming
// the file, the tensor and the field. So a reader never allocates more than the file holds.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace swarm::runtime {

struct TensorFile {
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in file order
};

// Writes atomically (a temporary file renamed over `path`); tensors are stored as float32 from
// the CPU, whatever their dtype and device.
void write_safetensors(const std::string& path, const TensorFile& file);
TensorFile read_safetensors(const std::string& path);
// The same from a file's bytes; `path` names it in errors. Tensors come in the order of their offsets.
TensorFile parse_safetensors(const std::string& bytes, const std::string& path);

}  // namespace swarm::runtime
