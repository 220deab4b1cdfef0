// RegistryServer: the job-scoped registry over HTTP (cpprest http_listener). See
// registry_service.h for the REST API. One per job; `swarm registry` runs it.
#pragma once

#include <memory>
#include <string>

#include "registry/registry_service.h"

namespace swarm::registry {

class RegistryServer {
 public:
  // `port` 0 picks a free port at start() (cpprest cannot report an ephemeral port, so the
  // server probes one itself and retries if it is taken in between).
  RegistryServer(std::string host, int port, RegistryOptions options = {});
  ~RegistryServer();  // stops
  RegistryServer(const RegistryServer&) = delete;
  RegistryServer& operator=(const RegistryServer&) = delete;

  // Binds and starts serving; throws std::runtime_error if it cannot, or if already started.
  void start();
  // Stops serving (idempotent); requests in flight are answered first by cpprest.
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
