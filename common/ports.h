// Picking a free TCP port for servers that cannot report an ephemeral one (civetweb, cpprest).
#pragma once

#include <string>

namespace swarm::runtime {

// A port that was free on `host` a moment ago (bind to port 0, read it, close). The caller binds
// it next and retries with another on a race.
int pick_free_port(const std::string& host = "127.0.0.1");

// Splits "host:port"; throws std::invalid_argument naming `what` on a malformed value.
std::pair<std::string, int> split_host_port(const std::string& value, const std::string& what);

}  // namespace swarm::runtime
