#include "common/random_token.h"

#include <openssl/rand.h>

#include <stdexcept>
#include <vector>

namespace swarm {

std::string random_hex_token(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (bytes > 0 && RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1)
    throw std::runtime_error("cannot generate a random token: RAND_bytes failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char c : buf) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

}  // namespace swarm
