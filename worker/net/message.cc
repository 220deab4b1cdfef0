#include "worker/net/message.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "common/json_quote.h"

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

uint64_t bytes_or_throw(DType dtype, const std::vector<int64_t>& shape, uint32_t block, const char* who) {
  uint64_t n = 0;
  if (!checked_nbytes(dtype, shape.data(), shape.size(), &n, block)) {
    throw std::invalid_argument(std::string(who) + ": bad tensor dtype " +
                                std::to_string(static_cast<int>(dtype)) + " / shape " +
                                shape_text(shape) + (dtype == DType::Blockwise8 ? " / block " + std::to_string(block) : ""));
  }
  return n;
}

}  // namespace

int64_t WireTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

WireTensor WireTensor::allocate(DType dtype, std::vector<int64_t> shape, uint32_t block) {
  if (block > 0xffff) throw std::invalid_argument("WireTensor::allocate: block " + std::to_string(block) + " exceeds 65535");
  if (dtype != DType::Blockwise8) block = 0;
  uint64_t nbytes = bytes_or_throw(dtype, shape, block, "WireTensor::allocate");
  if (nbytes > SIZE_MAX - 64) throw std::bad_alloc();
  // Round up so the buffer is a whole number of 64-byte lines; never zero bytes, so `data` of a
  // zero-size tensor is still a valid (unused) pointer.
  size_t alloc = nbytes == 0 ? 64 : static_cast<size_t>((nbytes + 63) / 64 * 64);
  void* p = ::operator new(alloc, kAlign);
  WireTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.block = block;
  t.data = static_cast<uint8_t*>(p);
  t.nbytes = static_cast<size_t>(nbytes);
  t.owner = std::shared_ptr<void>(p, AlignedFree{});
  return t;
}

WireTensor WireTensor::view(DType dtype, std::vector<int64_t> shape, const void* data,
                            std::shared_ptr<void> keepalive) {
  uint64_t nbytes = bytes_or_throw(dtype, shape, 0, "WireTensor::view");
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

std::string json_quote(const std::string& s) { return swarm::json_quote(s); }

Message make_error(uint64_t request_id, const std::string& what, ErrorCode code) {
  Message m;
  m.type = Error;
  m.request_id = request_id;
  m.meta = "{\"error\":" + json_quote(what) + ",\"code\":" + json_quote(to_string(code)) + "}";
  return m;
}

Message error_reply(uint64_t request_id, const std::exception& e) {
  const auto* coded = dynamic_cast<const CodedError*>(&e);
  return make_error(request_id, e.what(), coded ? coded->code() : ErrorCode::Generic);
}

namespace {

// `s` quoted for an error message, cut to about 60 characters.
std::string snippet(const std::string& s) { return json_quote(s.size() > 60 ? s.substr(0, 57) + "..." : s); }

void append_utf8(std::string& out, unsigned v) {
  if (v < 0x80) {
    out += static_cast<char>(v);
  } else if (v < 0x800) {
    out += static_cast<char>(0xC0 | (v >> 6));
    out += static_cast<char>(0x80 | (v & 0x3F));
  } else if (v >= 0xD800 && v <= 0xDFFF) {
    out += '?';  // a surrogate: error texts are ASCII in practice, no need to pair them
  } else {
    out += static_cast<char>(0xE0 | (v >> 12));
    out += static_cast<char>(0x80 | ((v >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (v & 0x3F));
  }
}

// Reads the flat JSON object an Error message carries; throws WireError on anything else.
class ErrorMetaReader {
 public:
  explicit ErrorMetaReader(const std::string& s) : s_(s) {}

  ErrorInfo read() {
    bool has_text = false;
    std::string code_name;
    bool has_code = false;
    ErrorInfo info;
    if (!eat('{')) fail("must be a JSON object");
    if (!eat('}')) {
      do {
        skip_ws();
        if (peek() != '"') fail("expected a member name");
        const std::string key = read_string();
        if (!eat(':')) fail("expected ':' after \"" + key + "\"");
        skip_ws();
        if (key == "error" || key == "code") {
          if (peek() != '"') {
            throw WireError("error.meta." + key + ": must be a string, got " + snippet(s_.substr(i_)));
          }
          (key == "error" ? info.text : code_name) = read_string();
          (key == "error" ? has_text : has_code) = true;
        } else {
          skip_scalar(key);
        }
      } while (eat(','));
      if (!eat('}')) fail("expected ',' or '}'");
    }
    skip_ws();
    if (i_ != s_.size()) fail("trailing characters after the object");
    if (!has_text) throw WireError("error.meta.error: is required, got " + snippet(s_));
    if (has_code) {
      auto c = find_error_code(code_name);
      if (!c) {
        throw WireError("error.meta.code: " + json_quote(code_name) + " is not one of " + error_code_names() +
                        " (the error said: " + snippet(info.text) + ")");
      }
      info.code = *c;
    }
    return info;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw WireError("error.meta: " + what + ", got " + snippet(s_));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (peek() != c || i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // At the opening quote.
  std::string read_string() {
    ++i_;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("unescaped control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned v = 0;
          for (int k = 0; k < 4; ++k) {
            const int h = i_ < s_.size() ? hex(s_[i_]) : -1;
            if (h < 0) fail("bad \\u escape");
            v = v * 16 + static_cast<unsigned>(h);
            ++i_;
          }
          append_utf8(out, v);
          break;
        }
        default: fail(std::string("bad escape \\") + e);
      }
    }
  }
  // A member this reader does not use: a string, number, true, false or null.
  void skip_scalar(const std::string& key) {
    if (peek() == '"') {
      read_string();
      return;
    }
    const size_t from = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == '+' || s_[i_] == '.'))
      ++i_;
    const std::string token = s_.substr(from, i_ - from);
    if (token == "true" || token == "false" || token == "null") return;
    char* end = nullptr;
    if (!token.empty() && (std::isdigit(static_cast<unsigned char>(token[0])) || token[0] == '-')) {
      std::strtod(token.c_str(), &end);
      if (end == token.c_str() + token.size()) return;
    }
    fail("member \"" + key + "\" must have a string, number, boolean or null value");
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

ErrorInfo decode_error(const Message& m) { return ErrorMetaReader(m.meta).read(); }

std::string error_text(const Message& m) {
  try {
    return decode_error(m).text;
  } catch (const WireError&) {
    return m.meta;
  }
}

}  // namespace swarm::net
