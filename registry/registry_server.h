// RegistryServer: the job-scoped registry over HTTP (common/http_server.h). See
// registry_service.h for the REST API. One per job; `swarm registry` runs it.
//
// A request body is capped at RegistryService::kMaxBodyBytes (1 MiB) while it is read, chunked
// or not, before the request is authenticated: a larger one is answered 413 as soon as its size
// is known and never held. An upload without Content-Length or Transfer-Encoding gets 411, and a
// request not complete within the HTTP request timeout (10 s unless `http` says otherwise) gets
// 408. These refusals carry X-Swarm-Time like every other reply.
#pragma once

#include <memory>
#include <string>

#include "common/http_server.h"
#include "registry/registry_service.h"

namespace swarm::registry {

class RegistryServer {
 public:
  // `port` 0: the kernel picks a free one at start() (port() tells it). `http`: the server's
  // timeouts, threads and connection limit; its body limit is lowered to the registry's.
  RegistryServer(std::string host, int port, RegistryOptions options = {}, http::ServerOptions http = {});
  ~RegistryServer();  // stops
  RegistryServer(const RegistryServer&) = delete;
  RegistryServer& operator=(const RegistryServer&) = delete;

  // Binds and starts serving; throws std::runtime_error if it cannot, or if already started.
  void start();
  // Stops serving (idempotent): open connections are closed, a reply being written is cut.
  void stop();
  // The bound port once started (the requested one before).
  int port() const;
  // "http://host:port" (brackets around IPv6 literals), usable as RegistryClient's base URL.
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::registry
