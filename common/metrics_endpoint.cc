#include "common/metrics_endpoint.h"

#include <utility>

namespace swarm::http {
namespace {

ServerOptions endpoint_options() {
  ServerOptions o;
  o.threads = 1;
  return o;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const std::string& host, int port, std::function<std::string()> exposition,
                                 Probe probe)
    : exposition_(std::move(exposition)),
      probe_(std::move(probe)),
      server_(host, port, [this](const Request& req) { return answer(req); }, endpoint_options()) {
  server_.start();
}

Response MetricsEndpoint::answer(const Request& req) const {
  if (req.method != "GET" && req.method != "HEAD") {
    Response r{405, "method: GET only, got " + req.method + "\n"};
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (req.path == "/metrics" || req.path == "/metrics/") return Response{200, exposition_(), "text/plain; version=0.0.4"};
  if (probe_) {
    if (auto r = probe_(req.path)) return *r;
  }
  return Response{404, "not found: " + req.path + "\n"};
}

}  // namespace swarm::http
