#include "registry/registry_server.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

namespace swarm::registry {
namespace {

std::string bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

http::Response serve(RegistryService& svc, const http::Request& req) {
  const std::string* authorization = req.header("authorization");
  HttpReply r = svc.handle(req.method, req.path, req.query, req.body, authorization ? *authorization : "");
  return http::Response{r.status, std::move(r.body), std::move(r.content_type), std::move(r.headers)};
}

}  // namespace

struct RegistryServer::Impl {
  std::string host;
  std::shared_ptr<RegistryService> service;
  std::unique_ptr<http::Server> server;
};

RegistryServer::RegistryServer(std::string host, int port, RegistryOptions options, http::ServerOptions http)
    : impl_(std::make_unique<Impl>()) {
  if (port < 0 || port > 65535)
    throw std::invalid_argument("registry: port must be in [0, 65535], got " + std::to_string(port));
  impl_->host = std::move(host);
  impl_->service = std::make_shared<RegistryService>(std::move(options));
  http.limits.max_body_bytes = std::min(http.limits.max_body_bytes, RegistryService::kMaxBodyBytes);
  // Every reply carries the registry's clock (X-Swarm-Time): clients sign with it (request_auth.h),
  // and a client refused by the HTTP layer learns it as well.
  http.finish = [svc = impl_->service](http::Response& r) {
    r.headers.emplace_back(auth::kTimeHeader, std::to_string(svc->unix_now_ms()));
  };
  std::shared_ptr<RegistryService> svc = impl_->service;
  impl_->server = std::make_unique<http::Server>(
      impl_->host, port, [svc](const http::Request& req) { return serve(*svc, req); }, std::move(http));
}

RegistryServer::~RegistryServer() = default;  // the http::Server stops

void RegistryServer::start() {
  try {
    impl_->server->start();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("registry: ") + e.what());
  }
  spdlog::info("registry: listening on {}", url());
}

void RegistryServer::stop() { impl_->server->stop(); }

int RegistryServer::port() const { return impl_->server->port(); }

std::string RegistryServer::url() const {
  return "http://" + bracketed(impl_->host) + ":" + std::to_string(port());
}

}  // namespace swarm::registry
