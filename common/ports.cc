#include "common/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace swarm::runtime {

int pick_free_port(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot find a free port on " + host);
  return ntohs(a.sin_port);
}

std::pair<std::string, int> split_host_port(const std::string& value, const std::string& what) {
  auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size())
    throw std::invalid_argument(what + ": expected host:port, got \"" + value + "\"");
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(value.substr(colon + 1), &used);
    if (used != value.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535)
    throw std::invalid_argument(what + ": port must be 0..65535, got \"" + value.substr(colon + 1) + "\"");
  return {value.substr(0, colon), port};
}

}  // namespace swarm::runtime
