// RegistryService::refusal: the registry's side of request authentication (request_auth.h).
#include <utility>

#include <spdlog/spdlog.h>

#include "registry/registry_metrics.h"
#include "registry/registry_service.h"

namespace swarm::registry {
namespace {

constexpr double kRefusalLogSeconds = 10;  // at most one refusal warning this often

}  // namespace

std::optional<HttpReply> RegistryService::refusal(const Request& req, const std::string& authorization) {
  const std::string target = req.query.empty() ? req.path : req.path + "?" + req.query;
  const auth::Verdict v = verifier_->verify(req.method, target, req.body, authorization, unix_now_ms());
  if (v.ok()) return std::nullopt;
  const char* reason = auth::reason_label(v.failure);
  int64_t unlogged = -1;  // >= 0: log this refusal, after that many unlogged ones
  {
    swarm::MutexLock lock(mu_);
    metrics_->add_auth_failure(reason);
    const double t = now();
    if (t - refusal_logged_at_ >= kRefusalLogSeconds) {
      refusal_logged_at_ = t;
      unlogged = refusals_unlogged_;
      refusals_unlogged_ = 0;
    } else {
      ++refusals_unlogged_;
    }
  }
  if (unlogged >= 0) {
    spdlog::warn("registry: refused {} {} ({}): {}{}", req.method, req.path, reason, v.message,
                 unlogged > 0 ? " (and " + std::to_string(unlogged) + " refusals not logged before it)" : "");
  }
  const nlohmann::json body{{"error", v.message}, {"reason", reason}};
  HttpReply r{401, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  if (v.failure == auth::Failure::CacheFull) {
    r.status = 503;
    r.headers.emplace_back("Retry-After", "1");
  } else {
    r.headers.emplace_back("WWW-Authenticate", auth::kScheme);
  }
  return r;
}

}  // namespace swarm::registry
