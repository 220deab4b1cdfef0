// safetensors files (the format Hugging Face and PyTorch tools load): an 8-byte little-endian
// header length N, N bytes of JSON {"__metadata__": {string: string}, NAME: {"dtype": "F32",
// "shape": [...], "data_offsets": [begin, end]}...} (padded with spaces to a multiple of 8), then
// the tensors' bytes, little-endian, row-major, in the order of their offsets.
//
// Written here as float32 (F32), the dtype export writes. Read as float32 from F32, BF16 and F16
// (a Hugging Face checkpoint's dtypes); the header may name any dtype of the format (its sizes are
// checked), and reading a tensor of another one is refused naming it. Reading checks the whole
// header against the file before it allocates anything: a bad length, JSON that is not an object,
// a dtype the format does not have, a dimension that is negative or not an integer, a shape whose
// product (or byte size) would overflow int64, a shape whose size does not match its offsets,
// offsets outside the data or overlapping another tensor's: each refused with std::runtime_error
// naming the file, the tensor and the field. So a reader never allocates more than the file holds
// (twice that for BF16 and F16, converted to float32).
//
// SafetensorsReader reads a file tensor by tensor: the header when opened, then each tensor's
// bytes at their offset (pread), never the rest of the file: a worker importing one stage of a
// Hugging Face checkpoint holds that stage, not the model.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace swarm::runtime {

struct TensorFile {
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in file order
};

// One tensor of a header, checked against the file: its bytes are data[begin, end), and their
// size is the shape's element count times the dtype's size.
struct TensorEntry {
  std::string name;
  std::string dtype;  // as the file names it: "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets within the data (after the header)
};

struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;
  std::vector<TensorEntry> tensors;  // in the order of their offsets
  uint64_t data_start = 0;           // 8 + N: where the data begins in the file
  // The entry named `name`, or nullptr.
  const TensorEntry* find(const std::string& name) const;
};

// Bytes per element of a dtype of the format (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16,
// I32, U32, F32, F64, I64, U64); 0 for any other name.
size_t safetensors_dtype_size(const std::string& dtype);
// Whether a tensor of `dtype` is read (as float32): F32, BF16, F16.
bool safetensors_dtype_readable(const std::string& dtype);

// The header of a file of `file_size` bytes whose first bytes are `prefix` (at least the 8-byte
// length and the N header bytes; more is ignored). `path` names the file in errors.
SafetensorsHeader parse_safetensors_header(const std::string& prefix, uint64_t file_size, const std::string& path);

// Writes atomically (a temporary file renamed over `path`); tensors are stored as float32 from
// the CPU, whatever their dtype and device.
void write_safetensors(const std::string& path, const TensorFile& file);
// Every tensor of the file, as float32, one at a time through SafetensorsReader.
TensorFile read_safetensors(const std::string& path);
// The same from a file's bytes; `path` names it in errors. Tensors come in the order of their offsets.
TensorFile parse_safetensors(const std::string& bytes, const std::string& path);

// Bytes read at an offset: a local file (pread), or an object in object storage (ranged GETs,
// hf_checkpoint.h). Implementations are safe to read from several threads at once.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads n bytes at `offset` into dst, or throws std::runtime_error naming the source.
  virtual void read_at(char* dst, uint64_t n, uint64_t offset) const = 0;
};

// A local file opened for reading (pread: no shared file position). Throws std::runtime_error
// naming the file when it cannot be opened.
std::unique_ptr<ByteSource> open_file_source(const std::string& path);

// A file read tensor by tensor. Thread-compatible: read() may be called from several threads at
// once.
class SafetensorsReader {
 public:
  // Opens `path` and reads and checks its header only. Throws std::runtime_error naming the file.
  explicit SafetensorsReader(const std::string& path);
  // The same over any source; `path` names it in errors.
  SafetensorsReader(std::unique_ptr<ByteSource> source, const std::string& path);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // The tensor's bytes, read at its offset, as a contiguous float32 CPU tensor. Throws
  // std::runtime_error naming the file, the tensor and its dtype when the dtype is not read, or
  // when the file is shorter than its header said (changed since it was opened).
  at::Tensor read(const TensorEntry& entry) const;

 private:
  std::string path_;
  std::unique_ptr<ByteSource> source_;
  SafetensorsHeader header_;
};

}  // namespace swarm::runtime
