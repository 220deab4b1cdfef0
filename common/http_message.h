// HTTP/1.1 messages as the project's small HTTP server (common/http_server.h) hands them to its
// handler and writes them back: a parsed request (common/http_parser.h makes one from bytes) and
// a reply, with the reply's serialisation. Pure code: no sockets.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace swarm::http {

struct Request {
  std::string method;  // as sent (methods are case-sensitive)
  std::string target;  // the request target as sent
  std::string path;    // the target's path, still percent-encoded; "*" for OPTIONS *
  std::string query;   // after the '?', without it; "" when none
  int version_minor = 1;  // HTTP/1.<version_minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;    // de-chunked

  // The first header named `lower_name` (lower case), or nullptr.
  const std::string* header(std::string_view lower_name) const;
  // Whether the connection stays open after the reply: HTTP/1.1 unless "Connection: close",
  // HTTP/1.0 only with "Connection: keep-alive".
  bool keep_alive() const;
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain";
  std::vector<std::pair<std::string, std::string>> headers{};  // more reply headers
};

// The standard reason phrase of `status` ("Payload Too Large"); "Unknown" for one it lacks.
const char* reason_phrase(int status);

// The reply as bytes: status line, Content-Type (when there is a body), Content-Length, the extra
// headers, "Connection: close" unless `keep_alive`, then the body (none when `head_only`, for a
// HEAD request). CR and LF inside a header name or value are written as spaces, so that no value
// can start a header of its own.
std::string serialize(const Response& r, bool keep_alive, bool head_only = false);

// A reply of the server's own ({"error": message}, application/json), as the registry words its
// errors: "<field>: <problem>, got <value>".
Response error_response(int status, const std::string& message);

}  // namespace swarm::http
