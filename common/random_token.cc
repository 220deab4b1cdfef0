#include "common/random_token.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
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

std::string kept_token(const std::string& path, size_t bytes) {
  std::string token;
  if (std::ifstream in(path); in) std::getline(in, token);
  if (!token.empty()) return token;
  token = random_hex_token(bytes);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const bool written = fd >= 0 && ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!written) throw std::runtime_error("cannot keep a token in " + path + ": " + std::strerror(err));
  return token;
}

}  // namespace swarm
