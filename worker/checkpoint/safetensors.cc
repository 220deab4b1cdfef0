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

// One tensor's entry of the header, checked against the file: its shape, and the byte range its
// offsets name, whose size the shape's fits.
struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// The shape of `where` (NAME.) as dimensions libtorch can hold, and its size in F32 bytes, with
// every product checked: the product of the dimensions, zeros counted as ones (what the strides
// reach), fits in int64, and so does nothing wrap.
std::vector<int64_t> checked_shape(const std::string& path, const std::string& where, const json& shape,
                                   uint64_t& bytes) {
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
  if (__builtin_mul_overflow(count, uint64_t{sizeof(float)}, &bytes))
    bad(path, where + "shape: its size in bytes overflows 64 bits, got " + shape.dump());
  return dims;
}

Entry checked_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_size) {
  const std::string where = cut(name) + ".";
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    bad(path, cut(name) + ": needs dtype, shape and data_offsets, got " + brief(v));
  const json& dtype = v["dtype"];
  if (!dtype.is_string() || dtype != "F32") bad(path, where + "dtype: only F32 is read, got " + brief(dtype));
  Entry e;
  e.name = name;
  uint64_t bytes = 0;
  e.shape = checked_shape(path, where, v["shape"], bytes);
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
                  " of F32 (" + std::to_string(bytes) + " bytes)");
  return e;
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

TensorFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot open: ") + std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_safetensors(bytes, path);
}

TensorFile parse_safetensors(const std::string& bytes, const std::string& path) {
  if (bytes.size() < 8) bad(path, "header length: the file has " + std::to_string(bytes.size()) + " bytes, fewer than 8");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    bad(path, "header length: " + std::to_string(n) + " does not fit the file's " + std::to_string(bytes.size()) + " bytes");
  const json header = json::parse(bytes.substr(8, n), nullptr, false);
  if (!header.is_object()) bad(path, "header: not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  TensorFile f;
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path, "__metadata__: not an object, got " + brief(v));
      for (const auto& [k, m] : v.items()) {
        if (!m.is_string()) bad(path, "__metadata__." + cut(k) + ": not a string, got " + brief(m));
        f.metadata[k] = m.get<std::string>();
      }
      continue;
    }
    entries.push_back(checked_entry(path, name, v, data_size));
  }
  // Every tensor's bytes are its own: sorted by offsets, each starts at or after the end of the one before.
  std::vector<size_t> by_offset(entries.size());
  for (size_t i = 0; i < by_offset.size(); ++i) by_offset[i] = i;
  std::sort(by_offset.begin(), by_offset.end(), [&](size_t a, size_t b) {
    return std::tie(entries[a].begin, entries[a].end) < std::tie(entries[b].begin, entries[b].end);
  });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const Entry& prev = entries[by_offset[k - 1]];
    const Entry& e = entries[by_offset[k]];
    if (e.begin < prev.end)
      bad(path, cut(e.name) + ".data_offsets: [" + std::to_string(e.begin) + "," + std::to_string(e.end) + "] overlaps " +
                    cut(prev.name) + "'s [" + std::to_string(prev.begin) + "," + std::to_string(prev.end) + "]");
  }
  // Only now, with every size checked against the file, is anything allocated: at most the data's size in all.
  const char* data = bytes.data() + 8 + n;
  for (size_t i : by_offset) {
    const Entry& e = entries[i];
    auto t = torch::empty(e.shape, torch::kFloat);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    f.tensors.emplace_back(e.name, std::move(t));
  }
  return f;
}

}  // namespace swarm::runtime
