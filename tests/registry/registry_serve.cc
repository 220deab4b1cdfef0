// registry_serve: a RegistryServer on 127.0.0.1 in a process of its own, for tests that watch
// the registry's memory from outside (tests/registry/registry_body_test.cc). Prints "port N" once
// it listens, then serves until SIGTERM or SIGINT.
// Usage: registry_serve SECRET [REQUEST_TIMEOUT_MS]
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "registry/registry_server.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: registry_serve SECRET [REQUEST_TIMEOUT_MS]\n");
    return 2;
  }
  // Blocked before any thread starts, so that every thread leaves them to sigwait below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  try {
    swarm::registry::RegistryOptions options;
    options.secret = argv[1];
    swarm::http::ServerOptions http;
    if (argc == 3) http.request_timeout = std::chrono::milliseconds(std::atol(argv[2]));
    swarm::registry::RegistryServer server("127.0.0.1", 0, options, http);
    server.start();
    std::printf("port %d\n", server.port());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    server.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "registry_serve: %s\n", e.what());
    return 1;
  }
  return 0;
}
