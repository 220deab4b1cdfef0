#include "worker/net/message.h"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

namespace swarm::net {

namespace {

constexpr std::align_val_t kAlign{64};

struct AlignedFree {
  void operator()(void* p) const { ::operator delete(p, kAlign); }
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t bytes_or_throw(DType dtype, const std::vector<int64_t>& shape, const char* who) {
  uint64_t n = 0;
  if (!checked_nbytes(dtype, shape.data(), shape.size(), &n)) {
    throw std::invalid_argument(std::string(who) + ": bad tensor dtype " +
                                std::to_string(static_cast<int>(dtype)) + " / shape " +
                                shape_text(shape));
  }
  return n;
}

}  // namespace

int64_t WireTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

WireTensor WireTensor::allocate(DType dtype, std::vector<int64_t> shape) {
  uint64_t nbytes = bytes_or_throw(dtype, shape, "WireTensor::allocate");
  if (nbytes > SIZE_MAX - 64) throw std::bad_alloc();
  // Round up so the buffer is a whole number of 64-byte lines; never zero bytes, so `data` of a
  // zero-size tensor is still a valid (unused) pointer.
  size_t alloc = nbytes == 0 ? 64 : static_cast<size_t>((nbytes + 63) / 64 * 64);
  void* p = ::operator new(alloc, kAlign);
  WireTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = static_cast<uint8_t*>(p);
  t.nbytes = static_cast<size_t>(nbytes);
  t.owner = std::shared_ptr<void>(p, AlignedFree{});
  return t;
}

WireTensor WireTensor::view(DType dtype, std::vector<int64_t> shape, const void* data,
                            std::shared_ptr<void> keepalive) {
  uint64_t nbytes = bytes_or_throw(dtype, shape, "WireTensor::view");
  if (data == nullptr && nbytes != 0) throw std::invalid_argument("WireTensor::view: null data");
  WireTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  // Sending never writes through `data`; the pointer is non-const only so that received and
  // sent tensors share one type.
  t.data = static_cast<uint8_t*>(const_cast<void*>(data));
  t.nbytes = static_cast<size_t>(nbytes);
  t.owner = std::move(keepalive);
  return t;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

Message make_error(uint64_t request_id, const std::string& what) {
  Message m;
  m.type = Error;
  m.request_id = request_id;
  m.meta = "{\"error\":" + json_quote(what) + "}";
  return m;
}

std::string error_text(const Message& m) {
  static const std::string prefix = "{\"error\":\"";
  const std::string& s = m.meta;
  if (s.compare(0, prefix.size(), prefix) != 0) return s;
  std::string out;
  for (size_t i = prefix.size(); i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') return out;
    if (c != '\\' || i + 1 >= s.size()) {
      out += c;
      continue;
    }
    char e = s[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u':
        if (i + 4 < s.size()) {
          unsigned v = static_cast<unsigned>(std::strtoul(s.substr(i + 1, 4).c_str(), nullptr, 16));
          out += v < 0x80 ? static_cast<char>(v) : '?';  // make_error only escapes controls
          i += 4;
        }
        break;
      default: out += e;  // \" \\ \/
    }
  }
  return s;  // unterminated: return the raw meta
}

}  // namespace swarm::net
