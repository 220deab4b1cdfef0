// The read-only HTTP endpoint of a process's metrics: GET (or HEAD) /metrics answers the
// Prometheus text exposition; `probe` answers the process's own probe paths (/readyz, /healthz);
// every other path is 404, every other method 405. On common/http_server.h, one thread (a scrape
// now and then, and the kubelet's probes). The operator and every data-plane process use it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/http_server.h"

namespace swarm::http {

class MetricsEndpoint {
 public:
  // `exposition`: the text /metrics answers. `probe`: the answer for another path, or nullopt (404).
  using Probe = std::function<std::optional<Response>(const std::string& path)>;
  // Serves on host:port at once (port 0: any; port() tells which); throws std::runtime_error
  // naming host and port when it cannot bind.
  MetricsEndpoint(const std::string& host, int port, std::function<std::string()> exposition, Probe probe);
  int port() const { return server_.port(); }

 private:
  Response answer(const Request& req) const;

  std::function<std::string()> exposition_;
  Probe probe_;
  Server server_;  // last: stops (no handler runs) before the callbacks above go
};

}  // namespace swarm::http
