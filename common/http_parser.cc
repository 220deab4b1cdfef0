#include "common/http_parser.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "common/json_quote.h"

namespace swarm::http {
namespace {

constexpr size_t kMaxChunkLine = 1024;  // a chunk size with its extensions, or a chunk's CRLF
constexpr size_t kQuoted = 80;          // bytes of a bad value an error message repeats

// A bad value as an error message names it: quoted, cut after kQuoted bytes.
std::string quoted(std::string_view s) {
  return json_quote(s.substr(0, kQuoted)) + (s.size() > kQuoted ? "..." : "");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 token characters (methods, header names).
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (std::isalnum(c)) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos) return false;
  }
  return true;
}

bool has_controls(std::string_view s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  return false;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A Content-Length: decimal digits, or a list of equal ones ("5, 5", which proxies may send);
// false when malformed.
bool content_length(std::string_view value, uint64_t& out) {
  bool any = false;
  while (true) {
    const size_t comma = value.find(',');
    const std::string_view item = trim(value.substr(0, comma));
    if (item.empty() || item.size() > 18) return false;  // 18 digits cannot overflow uint64
    uint64_t v = 0;
    for (char c : item) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (any && v != out) return false;
    out = v;
    any = true;
    if (comma == std::string_view::npos) return true;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

RequestParser::RequestParser(Limits limits) : limits_(limits) {}

size_t RequestParser::feed(std::string_view bytes) {
  size_t used = 0;
  while (used < bytes.size() && status_ == Status::NeedMore) {
    const std::string_view rest = bytes.substr(used);
    if (phase_ == Phase::Head) {
      used += feed_head(rest);
    } else if (phase_ == Phase::Body) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
      req_.body.append(rest.data(), n);
      remaining_ -= n;
      used += n;
      if (remaining_ == 0) done();
    } else {
      used += feed_chunked(rest);
    }
  }
  return used;
}

size_t RequestParser::feed_head(std::string_view bytes) {
  size_t skipped = 0;
  if (!started_) {
    // Blank lines before a request line are ignored (RFC 9112, 2.2): some clients send a CRLF
    // after a body.
    while (skipped < bytes.size() && (bytes[skipped] == '\r' || bytes[skipped] == '\n')) ++skipped;
    if (skipped == bytes.size()) return skipped;
    started_ = true;
    bytes.remove_prefix(skipped);
  }
  // Never more than the limit and the end-of-head marker: a longer head is refused unseen.
  const size_t cap = limits_.max_head_bytes + 4;
  const size_t take = std::min(bytes.size(), cap - head_.size());
  head_.append(bytes.data(), take);
  size_t end = std::string::npos;  // just past the blank line that ends the head
  for (size_t k = scanned_; k < head_.size() && end == std::string::npos; ++k) {
    if (head_[k] != '\n') continue;
    if (k + 1 < head_.size() && head_[k + 1] == '\n') end = k + 2;
    else if (k + 2 < head_.size() && head_[k + 1] == '\r' && head_[k + 2] == '\n') end = k + 3;
  }
  if (end == std::string::npos) {
    scanned_ = head_.size() >= 2 ? head_.size() - 2 : 0;
    if (head_.size() >= cap)
      fail(431, "head: request line and headers larger than " + std::to_string(limits_.max_head_bytes) +
                    " bytes, got more");
    return skipped + take;
  }
  const size_t excess = head_.size() - end;  // the first bytes of the body
  head_.resize(end);
  parse_head();
  return skipped + take - excess;
}

void RequestParser::parse_head() {
  std::vector<std::string> lines;
  for (size_t at = 0; at < head_.size();) {
    size_t eol = head_.find('\n', at);
    std::string line = head_.substr(at, eol - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    at = eol + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  const size_t head_bytes = head_.size();
  head_.clear();
  head_.shrink_to_fit();
  trailer_bytes_ = head_bytes;  // trailers share the head's budget
  if (head_bytes - 2 > limits_.max_head_bytes)
    return fail(431, "head: request line and headers larger than " + std::to_string(limits_.max_head_bytes) +
                         " bytes, got " + std::to_string(head_bytes));
  parse_request_line(lines.front());
  for (size_t i = 1; i < lines.size() && status_ == Status::NeedMore; ++i) {
    const std::string& line = lines[i];
    if (line.front() == ' ' || line.front() == '\t')
      return fail(400, "header: folded over lines (obsolete), got " + quoted(line));
    const size_t colon = line.find(':');
    const std::string_view name = std::string_view(line).substr(0, colon);
    if (colon == std::string::npos || !is_token(name))
      return fail(400, "header: not NAME: VALUE, got " + quoted(line));
    const std::string_view value = trim(std::string_view(line).substr(colon + 1));
    if (has_controls(value)) return fail(400, std::string(name) + ": control characters, got " + quoted(value));
    req_.headers.emplace_back(lower(name), std::string(value));
  }
  if (status_ == Status::NeedMore) parse_framing();
}

void RequestParser::parse_request_line(const std::string& line) {
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp1 == sp2 || has_controls(line))
    return fail(400, "request line: not METHOD TARGET HTTP/1.1, got " + quoted(line));
  req_.method = line.substr(0, sp1);
  req_.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (!is_token(req_.method)) return fail(400, "method: not a token, got " + quoted(req_.method));
  if (req_.target.empty() || req_.target.find(' ') != std::string::npos)
    return fail(400, "request line: not METHOD TARGET HTTP/1.1, got " + quoted(line));
  if (version == "HTTP/1.1" || version == "HTTP/1.0") {
    req_.version_minor = version.back() - '0';
  } else if (version.size() == 8 && version.rfind("HTTP/", 0) == 0 && std::isdigit(static_cast<unsigned char>(version[5])) &&
             version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]))) {
    return fail(505, "version: only HTTP/1.0 and HTTP/1.1 are served, got " + quoted(version));
  } else {
    return fail(400, "version: not HTTP/1.x, got " + quoted(version));
  }
  std::string_view t = req_.target;
  const std::string scheme = lower(t.substr(0, 8));
  if (scheme.rfind("http://", 0) == 0 || scheme.rfind("https://", 0) == 0) {
    // The absolute form (RFC 9112, 3.2.2): what follows the authority is the path.
    const size_t slash = t.find('/', t.find("//") + 2);
    t = slash == std::string_view::npos ? std::string_view("/") : t.substr(slash);
  } else if (t != "*" && t.front() != '/') {
    return fail(400, "target: must start with /, got " + quoted(req_.target));
  }
  const size_t q = t.find('?');
  req_.path = std::string(t.substr(0, q));
  req_.query = q == std::string_view::npos ? "" : std::string(t.substr(q + 1));
}

void RequestParser::parse_framing() {
  std::string te, cl;
  bool has_te = false, has_cl = false;
  for (const auto& [name, value] : req_.headers) {
    if (name == "transfer-encoding") {
      te += (has_te ? ", " : "") + value;
      has_te = true;
    } else if (name == "content-length") {
      cl += (has_cl ? ", " : "") + value;
      has_cl = true;
    } else if (name == "expect") {
      expect_continue_ = lower(value) == "100-continue";
    }
  }
  const std::string cap = std::to_string(limits_.max_body_bytes);
  if (has_te) {
    if (has_cl) return fail(400, "Content-Length: not allowed with Transfer-Encoding, got " + quoted(cl));
    if (lower(trim(te)) != "chunked")
      return fail(501, "Transfer-Encoding: only chunked is supported, got " + quoted(te));
    phase_ = Phase::ChunkSize;
    return;
  }
  if (has_cl) {
    uint64_t n = 0;
    if (!content_length(cl, n)) return fail(400, "Content-Length: must be a number of bytes, got " + quoted(cl));
    if (n > limits_.max_body_bytes)
      return fail(413, "body: larger than " + cap + " bytes, got " + std::to_string(n) + " (Content-Length)");
    if (n == 0) return done();
    req_.body.reserve(static_cast<size_t>(n));
    remaining_ = n;
    phase_ = Phase::Body;
    return;
  }
  const std::string& m = req_.method;
  if (m == "POST" || m == "PUT" || m == "PATCH")
    return fail(411, "Content-Length: a " + m + " needs Content-Length or Transfer-Encoding: chunked, got neither");
  done();
}

bool RequestParser::take_line(std::string_view bytes, size_t& used, size_t max, int status, const char* what) {
  const size_t lf = bytes.find('\n', used);
  const size_t end = lf == std::string_view::npos ? bytes.size() : lf;
  const size_t n = std::min(end - used, max + 2 - std::min(max + 2, line_.size()));
  line_.append(bytes.data() + used, n);
  if (line_.size() > max + 1) {  // +1: the CR before the LF
    fail(status, std::string(what) + ": a line longer than " + std::to_string(max) + " bytes, got " + quoted(line_));
    return false;
  }
  if (lf == std::string_view::npos) {
    used = bytes.size();
    return false;
  }
  used = lf + 1;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

size_t RequestParser::feed_chunked(std::string_view bytes) {
  size_t used = 0;
  while (used < bytes.size() && status_ == Status::NeedMore) {
    if (phase_ == Phase::ChunkData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size() - used));
      req_.body.append(bytes.data() + used, n);
      remaining_ -= n;
      used += n;
      if (remaining_ == 0) phase_ = Phase::ChunkEnd;
    } else if (phase_ == Phase::ChunkSize) {
      if (!take_line(bytes, used, kMaxChunkLine, 400, "chunk size")) break;
      on_chunk_size();
      line_.clear();
    } else if (phase_ == Phase::ChunkEnd) {
      if (!take_line(bytes, used, kMaxChunkLine, 400, "chunk")) break;
      if (!line_.empty()) fail(400, "chunk: more data than its size, got " + quoted(line_));
      phase_ = Phase::ChunkSize;
      line_.clear();
    } else {  // Trailer
      if (!take_line(bytes, used, limits_.max_head_bytes, 431, "trailer")) break;
      trailer_bytes_ += line_.size() + 2;
      if (trailer_bytes_ > limits_.max_head_bytes + 4)
        fail(431, "trailer: head and trailers larger than " + std::to_string(limits_.max_head_bytes) +
                      " bytes, got " + std::to_string(trailer_bytes_));
      else if (line_.empty())
        done();
      line_.clear();
    }
  }
  return used;
}

void RequestParser::on_chunk_size() {
  const std::string cap = std::to_string(limits_.max_body_bytes);
  uint64_t size = 0;
  size_t k = 0;
  for (; k < line_.size() && hex_digit(line_[k]) >= 0; ++k) {
    if (size > (std::numeric_limits<uint64_t>::max() >> 4))
      return fail(413, "body: larger than " + cap + " bytes, got a chunk size of " + quoted(line_) + " (chunked)");
    size = size * 16 + static_cast<uint64_t>(hex_digit(line_[k]));
  }
  const char after = k < line_.size() ? line_[k] : ';';
  if (k == 0 || (after != ';' && after != ' ' && after != '\t'))
    return fail(400, "chunk size: must be hexadecimal, got " + quoted(line_));
  const uint64_t room = limits_.max_body_bytes - req_.body.size();
  if (size > room) {
    uint64_t total = 0;
    if (__builtin_add_overflow(size, req_.body.size(), &total)) total = std::numeric_limits<uint64_t>::max();
    return fail(413, "body: larger than " + cap + " bytes, got at least " + std::to_string(total) + " (chunked)");
  }
  if (size == 0) {
    phase_ = Phase::Trailer;
  } else {
    remaining_ = size;
    phase_ = Phase::ChunkData;
  }
}

void RequestParser::fail(int status, std::string message) {
  status_ = Status::Failed;
  refusal_ = Refusal{status, std::move(message)};
}

void RequestParser::done() { status_ = Status::Done; }

Request RequestParser::take() {
  Request out = std::move(req_);
  req_ = Request{};
  status_ = Status::NeedMore;
  phase_ = Phase::Head;
  started_ = false;
  expect_continue_ = false;
  head_.clear();
  scanned_ = 0;
  line_.clear();
  trailer_bytes_ = 0;
  remaining_ = 0;
  return out;
}

}  // namespace swarm::http
