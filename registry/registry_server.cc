// cpprest otherwise defines a macro U(x), which breaks fmt (spdlog) and anything else named U.
#ifndef _TURN_OFF_PLATFORM_STRING
#define _TURN_OFF_PLATFORM_STRING
#endif

#include "registry/registry_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <stdexcept>
#include <utility>

#include <cpprest/http_listener.h>
#include <spdlog/spdlog.h>

#include "common/thread_annotations.h"

namespace swarm::registry {
namespace {

using web::http::http_request;
using web::http::http_response;
using web::http::experimental::listener::http_listener;

// Ports held by RegistryServers of this process. cpprest keeps one process-wide table of
// listening host:port pairs, and a failed open() of a port already listened on in-process tears
// down the listener that holds it; so in-process conflicts are refused before cpprest sees them.
struct PortsInUse {
  swarm::Mutex mu;
  std::set<int> ports GUARDED_BY(mu);
};
PortsInUse& ports_in_use() {
  static PortsInUse table;
  return table;
}

std::string bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// Binds a throwaway socket to (host, 0), the way cpprest resolves its listen address (first
// getaddrinfo result for a TCP stream), and returns the port the kernel chose.
int probe_free_port(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), "0", &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw std::runtime_error("registry: cannot resolve host \"" + host + "\": " + gai_strerror(rc));
  }
  int port = -1;
  int fd = ::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (fd >= 0) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::bind(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      if (addr.ss_family == AF_INET) {
        port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
      } else if (addr.ss_family == AF_INET6) {
        port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (port <= 0) throw std::runtime_error("registry: cannot find a free port on " + host);
  return port;
}

// Every reply carries the registry's clock (X-Swarm-Time): clients sign with it (request_auth.h).
void send(const RegistryService& svc, http_request req, const HttpReply& r) {
  try {
    http_response resp(static_cast<web::http::status_code>(r.status));
    resp.set_body(r.body, r.content_type);
    resp.headers().add(auth::kTimeHeader, std::to_string(svc.unix_now_ms()));
    for (const auto& [name, value] : r.headers) resp.headers().add(name, value);
    // Observe the reply's outcome: an unobserved failed pplx task terminates the process.
    req.reply(resp).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (const std::exception& e) {
        spdlog::debug("registry: reply failed: {}", e.what());
      }
    });
  } catch (const std::exception& e) {
    spdlog::debug("registry: reply failed: {}", e.what());
  }
}

void serve(const std::shared_ptr<RegistryService>& svc, http_request req) {
  try {
    if (req.headers().content_length() > RegistryService::kMaxBodyBytes) {
      send(*svc, req, HttpReply{413, R"({"error":"body: larger than 1048576 bytes, got )" +
                                         std::to_string(req.headers().content_length()) + "\"}"});
      return;
    }
    const std::string method = req.method();
    const web::uri rel = req.relative_uri();
    const std::string path = rel.path();
    const std::string query = rel.query();
    const auto auth_header = req.headers().find(web::http::header_names::authorization);
    const std::string authorization = auth_header == req.headers().end() ? "" : auth_header->second;
    req.extract_utf8string(/*ignore_content_type=*/true)
        .then([svc, req, method, path, query, authorization](pplx::task<std::string> body) {
          HttpReply r;
          try {
            r = svc->handle(method, path, query, body.get(), authorization);
          } catch (const std::exception& e) {
            r = HttpReply{400, R"({"error":"body: unreadable, got nothing"})"};
          }
          send(*svc, req, r);
        });
  } catch (const std::exception& e) {
    spdlog::warn("registry: bad request: {}", e.what());
    send(*svc, req, HttpReply{400, R"({"error":"request: unreadable, got nothing"})"});
  }
}

}  // namespace

struct RegistryServer::Impl {
  std::string host;
  int port;
  std::shared_ptr<RegistryService> service;
  std::unique_ptr<http_listener> listener;
};

RegistryServer::RegistryServer(std::string host, int port, RegistryOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (port < 0 || port > 65535) {
    throw std::invalid_argument("registry: port must be in [0, 65535], got " +
                                std::to_string(port));
  }
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->service = std::make_shared<RegistryService>(std::move(options));
}

RegistryServer::~RegistryServer() {
  try {
    stop();
  } catch (...) {
  }
}

void RegistryServer::start() {
  if (impl_->listener) throw std::runtime_error("registry: already started");
  const bool pick = impl_->port == 0;
  const int tries = pick ? 20 : 1;
  std::string last_error;
  PortsInUse& in_use = ports_in_use();
  swarm::MutexLock lock(in_use.mu);
  for (int i = 0; i < tries; ++i) {
    const int port = pick ? probe_free_port(impl_->host) : impl_->port;
    const std::string url = "http://" + bracketed(impl_->host) + ":" + std::to_string(port) + "/";
    if (in_use.ports.count(port)) {
      last_error = url + ": port already served by a registry in this process";
      continue;
    }
    try {
      auto listener = std::make_unique<http_listener>(url);
      std::shared_ptr<RegistryService> svc = impl_->service;
      listener->support([svc](http_request req) { serve(svc, std::move(req)); });
      listener->open().wait();
      impl_->listener = std::move(listener);
      impl_->port = port;
      in_use.ports.insert(port);
      spdlog::info("registry: listening on {}", url);
      return;
    } catch (const std::exception& e) {
      last_error = url + ": " + e.what();  // taken in between probe and bind: try another
    }
  }
  throw std::runtime_error("registry: cannot listen on " + last_error);
}

void RegistryServer::stop() {
  if (!impl_->listener) return;
  auto listener = std::move(impl_->listener);
  try {
    listener->close().wait();
  } catch (const std::exception& e) {
    spdlog::warn("registry: close failed: {}", e.what());
  }
  PortsInUse& in_use = ports_in_use();
  swarm::MutexLock lock(in_use.mu);
  in_use.ports.erase(impl_->port);
}

int RegistryServer::port() const { return impl_->port; }

std::string RegistryServer::url() const {
  return "http://" + bracketed(impl_->host) + ":" + std::to_string(impl_->port);
}

}  // namespace swarm::registry
