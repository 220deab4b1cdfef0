#include "worker/data/token_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "worker/data/text_dataset.h"

namespace swarm::data {
namespace {

template <class T>
T get_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
  return v;
}

template <class T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw DatasetError("token file " + path + ": " + what);
}

}  // namespace

bool is_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kTokenFileMagic)] = {};
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, kTokenFileMagic, sizeof(magic)) == 0;
}

std::string hex(const Sha256& h) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * h.size());
  for (uint8_t b : h) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

TokenFile read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot open: ") + std::strerror(errno));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) bad(path, "read error");
  if (data.size() < kTokenFileHeaderV1) bad(path, "header: " + std::to_string(data.size()) + " bytes, fewer than 32");
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  if (std::memcmp(p, kTokenFileMagic, sizeof(kTokenFileMagic)) != 0) bad(path, "magic: not SWTOKENS");
  TokenFile f;
  f.version = get_le<uint32_t>(p + 8);
  if (f.version != 1 && f.version != 2) bad(path, "version: " + std::to_string(f.version) + ", this build reads 1 and 2");
  const size_t header = f.version == 1 ? kTokenFileHeaderV1 : kTokenFileHeader;
  if (data.size() < header)
    bad(path, "header: " + std::to_string(data.size()) + " bytes, fewer than " + std::to_string(header));
  const auto width = get_le<uint32_t>(p + 12);
  if (width != 2 && width != 4) bad(path, "width: " + std::to_string(width) + ", expected 2 or 4");
  f.vocab_size = get_le<uint64_t>(p + 16);
  if (f.vocab_size < 2 || f.vocab_size > (uint64_t{1} << (8 * width)))
    bad(path, "vocabulary size: " + std::to_string(f.vocab_size) + " does not fit width " + std::to_string(width));
  const auto count = get_le<uint64_t>(p + 24);
  if (f.version == 2) {
    Sha256 h;
    std::memcpy(h.data(), p + kTokenFileHeaderV1, h.size());
    f.tokenizer_sha256 = h;
  }
  const uint64_t body = data.size() - header;
  if (body % width != 0 || body / width != count)
    bad(path, "count: " + std::to_string(count) + " ids of " + std::to_string(width) + " bytes, but " +
                  std::to_string(body) + " bytes follow the header");
  f.ids.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    const unsigned char* q = p + header + i * width;
    const uint32_t id = width == 2 ? get_le<uint16_t>(q) : get_le<uint32_t>(q);
    if (id >= f.vocab_size)
      bad(path, "id " + std::to_string(id) + " at offset " + std::to_string(header + i * width) +
                    " is >= the vocabulary size " + std::to_string(f.vocab_size));
    f.ids[i] = id;
  }
  return f;
}

void write_token_file(const std::string& path, uint64_t vocab_size, const Sha256& tokenizer_sha256,
                      const std::vector<uint32_t>& ids) {
  if (vocab_size < 2 || vocab_size > (uint64_t{1} << 32)) bad(path, "vocabulary size " + std::to_string(vocab_size));
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  std::string out(kTokenFileMagic, sizeof(kTokenFileMagic));
  put_le<uint32_t>(out, 2);
  put_le<uint32_t>(out, width);
  put_le<uint64_t>(out, vocab_size);
  put_le<uint64_t>(out, ids.size());
  out.append(reinterpret_cast<const char*>(tokenizer_sha256.data()), tokenizer_sha256.size());
  out.reserve(out.size() + ids.size() * width);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size)
      bad(path, "id " + std::to_string(ids[i]) + " at index " + std::to_string(i) + " is >= the vocabulary size " +
                    std::to_string(vocab_size));
    if (width == 2) {
      put_le<uint16_t>(out, static_cast<uint16_t>(ids[i]));
    } else {
      put_le<uint32_t>(out, ids[i]);
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    if (!o || !o.write(out.data(), static_cast<std::streamsize>(out.size())) || !o.flush())
      bad(path, std::string("cannot write: ") + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) bad(path, "cannot rename " + tmp + ": " + ec.message());
}

}  // namespace swarm::data
