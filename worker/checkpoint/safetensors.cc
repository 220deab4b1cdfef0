#include "worker/checkpoint/safetensors.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace swarm::runtime {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // what readers of the format accept

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::runtime_error("safetensors " + path + ": " + what);
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
  if (bytes.size() < 8) bad(path, "header length: the file has " + std::to_string(bytes.size()) + " bytes, fewer than 8");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    bad(path, "header length: " + std::to_string(n) + " does not fit the file's " + std::to_string(bytes.size()) + " bytes");
  const json header = json::parse(bytes.substr(8, n), nullptr, false);
  if (!header.is_object()) bad(path, "header: not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  TensorFile f;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path, "__metadata__: not an object");
      for (const auto& [k, m] : v.items()) {
        if (!m.is_string()) bad(path, "__metadata__." + k + ": not a string");
        f.metadata[k] = m.get<std::string>();
      }
      continue;
    }
    const std::string where = name + ".";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      bad(path, name + ": needs dtype, shape and data_offsets");
    if (v["dtype"] != "F32") bad(path, where + "dtype: only F32 is read, got " + v["dtype"].dump());
    std::vector<int64_t> shape;
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) bad(path, where + "shape: " + v["shape"].dump());
      shape.push_back(d.get<int64_t>());
      count *= d.get<uint64_t>();
      if (count > (uint64_t{1} << 40)) bad(path, where + "shape: too large, " + v["shape"].dump());
    }
    const auto& o = v["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned())
      bad(path, where + "data_offsets: must be two unsigned integers, got " + o.dump());
    const uint64_t b = o[0].get<uint64_t>(), e = o[1].get<uint64_t>();
    if (b > e || e > data_size) bad(path, where + "data_offsets: " + o.dump() + " outside the " + std::to_string(data_size) + " data bytes");
    if (e - b != count * sizeof(float))
      bad(path, where + "data_offsets: " + std::to_string(e - b) + " bytes for shape " + v["shape"].dump() + " of F32");
    auto t = torch::empty(shape, torch::kFloat);
    if (count > 0) std::memcpy(t.data_ptr(), data + b, e - b);
    order.emplace_back(b, name);
    f.tensors.emplace_back(name, std::move(t));
  }
  // File order; and no two tensors share bytes.
  std::vector<size_t> idx(f.tensors.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return order[a].first < order[b].first; });
  std::vector<std::pair<std::string, at::Tensor>> sorted;
  uint64_t end = 0;
  for (size_t i : idx) {
    const uint64_t b = order[i].first;
    if (b < end) bad(path, order[i].second + ".data_offsets: overlaps the tensor before it");
    end = b + static_cast<uint64_t>(f.tensors[i].second.numel()) * sizeof(float);
    sorted.push_back(std::move(f.tensors[i]));
  }
  f.tensors = std::move(sorted);
  return f;
}

}  // namespace swarm::runtime
