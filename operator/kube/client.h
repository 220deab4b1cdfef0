// A small Kubernetes REST client on cpprestsdk: JSON in and out, TLS with the kubeconfig's CA and
// client certificate (or a bearer token), client-side rate limit (token bucket), request counters
// by verb for metrics, and line-streamed responses for watches.
//
// Thread-safe: any number of threads may call any method at once. Streams use their own
// connection, so a long watch never blocks ordinary requests.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/thread_annotations.h"
#include "operator/kube/config.h"
#include "operator/kube/retry.h"

namespace swarm::kube {

using json = nlohmann::json;

// A non-2xx answer. status 0 = no answer at all (connection refused, TLS, timeout).
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string reason, const std::string& message)
      : std::runtime_error(message), status_(status), reason_(std::move(reason)) {}
  int status() const { return status_; }
  // The Status object's `reason` (NotFound, AlreadyExists, Conflict, Expired, Invalid, ...).
  const std::string& reason() const { return reason_; }
  bool not_found() const { return status_ == 404; }
  bool conflict() const { return status_ == 409; }
  bool gone() const { return status_ == 410; }

 private:
  int status_;
  std::string reason_;
};

enum class PatchType { Merge, StrategicMerge, Json };

struct ClientOptions {
  double qps = 50;        // sustained requests per second (watches excluded)
  double burst = 100;     // bucket size
  std::chrono::seconds timeout{30};
  std::string user_agent = "swarm-operator";
};

// "/api/v1/namespaces/ns/pods/name/status" and friends. group_version "v1" = the core group.
// ns "" = cluster-scoped (or all namespaces for a list); name "" = the collection.
std::string resource_path(const std::string& group_version, const std::string& ns,
                          const std::string& plural, const std::string& name = "",
                          const std::string& subresource = "");
// Percent-encodes a query value (label selectors contain '=' and ',').
std::string url_encode(const std::string& s);

class Client {
 public:
  explicit Client(KubeConfig cfg, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  json get(const std::string& path);
  std::optional<json> get_if_exists(const std::string& path);
  json create(const std::string& collection_path, const json& obj);
  // PUT; carries metadata.resourceVersion, so a stale write fails with 409 instead of clobbering.
  json replace(const std::string& path, const json& obj);
  json patch(const std::string& path, const json& patch, PatchType type = PatchType::Merge);
  // DELETE; grace_seconds unset = the object's default. A missing object is not an error.
  // Returns whether the object existed.
  bool remove(const std::string& path, std::optional<int> grace_seconds = std::nullopt,
              const std::string& preconditions_uid = "");

  // GETs `path_and_query` and calls on_line for each newline-terminated line of the body as it
  // arrives, until the server ends the response, on_line returns false, or cancel() is called with
  // `stream_id`. Throws ApiError on a non-200 answer or a broken connection.
  void stream(const std::string& path_and_query, const std::function<bool(const std::string&)>& on_line,
              int stream_id = 0, std::chrono::seconds idle_timeout = std::chrono::seconds(120));
  void cancel_stream(int stream_id);
  int new_stream_id() { return ++next_stream_id_; }

  const KubeConfig& config() const { return cfg_; }
  // Requests sent, by verb (GET LIST WATCH POST PUT PATCH DELETE). Snapshot.
  std::map<std::string, std::uint64_t> request_counts() const EXCLUDES(mu_);
  std::uint64_t total_requests() const EXCLUDES(mu_);
  // Called after each request with its verb (for metrics). Set before use.
  std::function<void(const std::string& verb, int status)> on_request;
  // Called once each time the API server answers again after requests could not reach it (no
  // answer, or a 5xx; kube::Reachability), on the thread whose request got the answer, with no
  // lock held: the controller wakes its informers and its backed-off keys. Set before use.
  std::function<void()> on_reachable_again;

 private:
  struct Impl;
  json call(const std::string& method, const std::string& path, const std::string& body,
            const std::string& content_type, int* status_out = nullptr);
  void throttle() EXCLUDES(mu_);
  void count(const std::string& verb, int status) EXCLUDES(mu_);

  KubeConfig cfg_;
  ClientOptions options_;
  std::unique_ptr<Impl> impl_;
  std::atomic<int> next_stream_id_{0};
  mutable swarm::Mutex mu_;
  std::map<std::string, std::uint64_t> counts_ GUARDED_BY(mu_);
  Reachability reachability_ GUARDED_BY(mu_);
  double tokens_ GUARDED_BY(mu_);  // the rate limiter's bucket (options_.qps, options_.burst)
  std::chrono::steady_clock::time_point last_refill_ GUARDED_BY(mu_);
};

}  // namespace swarm::kube
