// RFC 3986 percent-encoding: unreserved characters (A-Z a-z 0-9 - _ . ~) as they are, '/' too when
// keep_slash, every other byte as %XX with upper-case hex. What SigV4 signs (worker/storage) and
// what the API server's query parameters need (operator/kube).
#pragma once

#include <string>

namespace swarm {

std::string percent_encode(const std::string& s, bool keep_slash = false);

}  // namespace swarm
