#include "worker/checkpoint/safetensors.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace swarm::runtime {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // what readers of the format accept

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors " + path + ": " + what);
}

constexpr size_t kMaxDims = 64;  // more than any model has; bounds the work per tensor
constexpr size_t kShown = 80;    // bytes of a name or value an error message repeats

// A name as an error message shows it: cut after kShown bytes (a key can be megabytes long).
std::string cut(const std::string& s) { return s.size() > kShown ? s.substr(0, kShown) + "..." : s; }

// A JSON value as an error message shows it, never walking into it (a value can nest a million
// levels deep): scalars and short flat arrays as JSON, other containers by kind and size.
std::string brief(const json& v) {
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  if (v.is_array()) {
    bool flat = v.size() <= 8;
    for (size_t i = 0; flat && i < v.size(); ++i) flat = v[i].is_primitive();
    if (!flat) return "an array of " + std::to_string(v.size()) + " elements";
  }
  return cut(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

// The shape of `where` (NAME.) as dimensions libtorch can hold, and its size in bytes of
// `elem` bytes per element, with every product checked: the product of the dimensions, zeros
// counted as ones (what the strides reach), fits in int64, and so does nothing wrap.
std::vector<int64_t> checked_shape(const std::string& path, const std::string& where, const json& shape,
                                   uint64_t elem, uint64_t& bytes) {
  if (!shape.is_array()) bad(path, where + "shape: must be an array of dimensions, got " + brief(shape));
  if (shape.size() > kMaxDims)
    bad(path, where + "shape: at most " + std::to_string(kMaxDims) + " dimensions, got " + std::to_string(shape.size()));
  constexpr uint64_t kMaxExtent = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  std::vector<int64_t> dims;
  uint64_t extent = 1, count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json& d = shape[i];
    const std::string field = where + "shape[" + std::to_string(i) + "]";
    if (d.is_number_integer() && !d.is_number_unsigned()) bad(path, field + ": must not be negative, got " + d.dump());
    if (!d.is_number_unsigned()) bad(path, field + ": must be a non-negative integer, got " + brief(d));
    const uint64_t u = d.get<uint64_t>();
    if (__builtin_mul_overflow(extent, std::max<uint64_t>(u, 1), &extent) || extent > kMaxExtent)
      bad(path, where + "shape: the product of its dimensions overflows int64, got " + shape.dump());
    count *= u;  // <= extent: cannot wrap
    dims.push_back(static_cast<int64_t>(u));
  }
  if (__builtin_mul_overflow(count, elem, &bytes))
    bad(path, where + "shape: its size in bytes overflows 64 bits, got " + shape.dump());
  return dims;
}

TensorEntry checked_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_size) {
  const std::string where = cut(name) + ".";
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    bad(path, cut(name) + ": needs dtype, shape and data_offsets, got " + brief(v));
  const json& dtype = v["dtype"];
  const uint64_t elem = dtype.is_string() ? safetensors_dtype_size(dtype.get<std::string>()) : 0;
  if (elem == 0) bad(path, where + "dtype: not a safetensors dtype, got " + brief(dtype));
  TensorEntry e;
  e.name = name;
  e.dtype = dtype.get<std::string>();
  uint64_t bytes = 0;
  e.shape = checked_shape(path, where, v["shape"], elem, bytes);
  const json& o = v["data_offsets"];
  if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned())
    bad(path, where + "data_offsets: must be two unsigned integers, got " + brief(o));
  e.begin = o[0].get<uint64_t>();
  e.end = o[1].get<uint64_t>();
  if (e.begin > e.end) bad(path, where + "data_offsets: begins after it ends, got " + o.dump());
  if (e.end > data_size)
    bad(path, where + "data_offsets: " + o.dump() + " outside the " + std::to_string(data_size) + " data bytes");
  if (e.end - e.begin != bytes)
    bad(path, where + "data_offsets: " + std::to_string(e.end - e.begin) + " bytes for shape " + v["shape"].dump() +
                  " of " + e.dtype + " (" + std::to_string(bytes) + " bytes)");
  return e;
}

// Refuses a tensor whose dtype is not read, before anything is allocated for it.
void check_readable(const std::string& path, const TensorEntry& e) {
  if (!safetensors_dtype_readable(e.dtype))
    bad(path, cut(e.name) + ".dtype: only F32, BF16 and F16 are read, got \"" + e.dtype + "\"");
}

// The libtorch dtype a readable safetensors dtype is stored as.
at::ScalarType stored_type(const std::string& dtype) {
  return dtype == "BF16" ? torch::kBFloat16 : dtype == "F16" ? torch::kHalf : torch::kFloat;
}

// A float32 tensor of `e`'s shape from its stored bytes at `data` (e.end - e.begin of them).
at::Tensor to_float(const TensorEntry& e, const char* data) {
  auto stored = torch::empty(e.shape, stored_type(e.dtype));
  if (e.end > e.begin) std::memcpy(stored.data_ptr(), data, e.end - e.begin);
  return stored.scalar_type() == torch::kFloat ? stored : stored.to(torch::kFloat);
}

}  // namespace

void write_safetensors(const std::string& path, const TensorFile& file) {
  json header = json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__" || header.contains(name)) bad(path, "tensor name \"" + name + "\" twice or reserved");
    auto c = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) bad(path, "cannot write " + tmp + ": " + std::strerror(errno));
    const uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& c : data)
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
    out.flush();
    if (!out) bad(path, "cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) bad(path, "cannot rename " + tmp + ": " + ec.message());
}

const TensorEntry* SafetensorsHeader::find(const std::string& name) const {
  for (const auto& e : tensors)
    if (e.name == name) return &e;
  return nullptr;
}

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1}, {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

bool safetensors_dtype_readable(const std::string& dtype) { return dtype == "F32" || dtype == "BF16" || dtype == "F16"; }

SafetensorsHeader parse_safetensors_header(const std::string& prefix, uint64_t file_size, const std::string& path) {
  if (file_size < 8 || prefix.size() < 8)
    bad(path, "header length: the file has " + std::to_string(file_size) + " bytes, fewer than 8");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  if (n > kMaxHeader || n > file_size - 8)
    bad(path, "header length: " + std::to_string(n) + " does not fit the file's " + std::to_string(file_size) + " bytes");
  if (prefix.size() - 8 < n) bad(path, "header: " + std::to_string(n) + " bytes, only " + std::to_string(prefix.size() - 8) + " given");
  const json header = json::parse(prefix.begin() + 8, prefix.begin() + 8 + static_cast<std::ptrdiff_t>(n), nullptr, false);
  if (!header.is_object()) bad(path, "header: not a JSON object");
  const uint64_t data_size = file_size - 8 - n;
  SafetensorsHeader h;
  h.data_start = 8 + n;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path, "__metadata__: not an object, got " + brief(v));
      for (const auto& [k, m] : v.items()) {
        if (!m.is_string()) bad(path, "__metadata__." + cut(k) + ": not a string, got " + brief(m));
        h.metadata[k] = m.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(checked_entry(path, name, v, data_size));
  }
  // Every tensor's bytes are its own: sorted by offsets, each starts at or after the end of the one before.
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  for (size_t k = 1; k < h.tensors.size(); ++k) {
    const TensorEntry& prev = h.tensors[k - 1];
    const TensorEntry& e = h.tensors[k];
    if (e.begin < prev.end)
      bad(path, cut(e.name) + ".data_offsets: [" + std::to_string(e.begin) + "," + std::to_string(e.end) + "] overlaps " +
                    cut(prev.name) + "'s [" + std::to_string(prev.begin) + "," + std::to_string(prev.end) + "]");
  }
  return h;
}

TensorFile parse_safetensors(const std::string& bytes, const std::string& path) {
  const SafetensorsHeader h = parse_safetensors_header(bytes, bytes.size(), path);
  for (const auto& e : h.tensors) check_readable(path, e);
  // Only now, with every size checked against the file, is anything allocated: at most the data's
  // size in all (twice that for 16-bit dtypes, converted).
  TensorFile f;
  f.metadata = h.metadata;
  for (const auto& e : h.tensors) f.tensors.emplace_back(e.name, to_float(e, bytes.data() + h.data_start + e.begin));
  return f;
}

TensorFile read_safetensors(const std::string& path) {
  const SafetensorsReader r(path);
  for (const auto& e : r.header().tensors) check_readable(path, e);
  TensorFile f;
  f.metadata = r.header().metadata;
  for (const auto& e : r.header().tensors) f.tensors.emplace_back(e.name, r.read(e));
  return f;
}

namespace {

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) bad(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      bad(path, std::string("cannot stat: ") + std::strerror(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  void read_at(char* dst, uint64_t n, uint64_t offset) const override {
    while (n > 0) {
      const ssize_t got = ::pread(fd_, dst, std::min<uint64_t>(n, uint64_t{1} << 30), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        bad(path_, "cannot read " + std::to_string(n) + " bytes at " + std::to_string(offset) + ": " + std::strerror(errno));
      if (got == 0) bad(path_, "the file ends before byte " + std::to_string(offset + n) + " (was it changed after it was opened?)");
      dst += got;
      n -= static_cast<uint64_t>(got);
      offset += static_cast<uint64_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

std::unique_ptr<ByteSource> open_file_source(const std::string& path) { return std::make_unique<FileSource>(path); }

SafetensorsReader::SafetensorsReader(const std::string& path) : SafetensorsReader(open_file_source(path), path) {}

SafetensorsReader::SafetensorsReader(std::unique_ptr<ByteSource> source, const std::string& path)
    : path_(path), source_(std::move(source)) {
  const uint64_t size = source_->size();
  std::string prefix(std::min<uint64_t>(size, 8), '\0');
  source_->read_at(prefix.data(), prefix.size(), 0);
  if (prefix.size() == 8) {
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
    if (n <= kMaxHeader && n <= size - 8) {  // else parse_safetensors_header refuses it
      prefix.resize(8 + n);
      source_->read_at(prefix.data() + 8, n, 8);
    }
  }
  header_ = parse_safetensors_header(prefix, size, path);
}

at::Tensor SafetensorsReader::read(const TensorEntry& e) const {
  check_readable(path_, e);
  // Read straight into a tensor of the stored dtype; 16-bit ones are then converted (the only copy).
  auto stored = torch::empty(e.shape, stored_type(e.dtype));
  source_->read_at(static_cast<char*>(stored.data_ptr()), e.end - e.begin, header_.data_start + e.begin);
  return stored.scalar_type() == torch::kFloat ? stored : stored.to(torch::kFloat);
}

}  // namespace swarm::runtime
