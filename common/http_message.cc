#include "common/http_message.h"

#include <cctype>

#include "common/json_quote.h"

namespace swarm::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether the comma-separated token list `value` holds `token` (case-insensitive).
bool has_token(const std::string& value, std::string_view token) {
  const std::string v = lower(value);
  size_t at = 0;
  while (at <= v.size()) {
    size_t end = v.find(',', at);
    if (end == std::string::npos) end = v.size();
    size_t b = at, e = end;
    while (b < e && (v[b] == ' ' || v[b] == '\t')) ++b;
    while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t')) --e;
    if (std::string_view(v).substr(b, e - b) == token) return true;
    at = end + 1;
  }
  return false;
}

void append_clean(std::string& out, const std::string& s) {
  for (char c : s) out.push_back(c == '\r' || c == '\n' ? ' ' : c);
}

}  // namespace

const std::string* Request::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

bool Request::keep_alive() const {
  bool close = false, keep = false;
  for (const auto& [name, value] : headers) {
    if (name != "connection") continue;
    close = close || has_token(value, "close");
    keep = keep || has_token(value, "keep-alive");
  }
  if (close) return false;
  return version_minor >= 1 || keep;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string serialize(const Response& r, bool keep_alive, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  if (!r.body.empty() && !r.content_type.empty()) {
    out += "Content-Type: ";
    append_clean(out, r.content_type);
    out += "\r\n";
  }
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [name, value] : r.headers) {
    append_clean(out, name);
    out += ": ";
    append_clean(out, value);
    out += "\r\n";
  }
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_only) out += r.body;
  return out;
}

Response error_response(int status, const std::string& message) {
  return Response{status, "{\"error\":" + json_quote(message) + "}", "application/json"};
}

}  // namespace swarm::http
