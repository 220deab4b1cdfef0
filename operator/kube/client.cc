#ifndef _TURN_OFF_PLATFORM_STRING
#define _TURN_OFF_PLATFORM_STRING  // cpprest's U() macro collides with fmt
#endif
#include "operator/kube/client.h"

#include "common/percent_encode.h"

#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>

#include <set>
#include <thread>

namespace swarm::kube {
namespace http = web::http;

struct Client::Impl {
  http::client::http_client_config config;
  std::unique_ptr<http::client::http_client> client;
  swarm::Mutex streams_mu;
  std::map<int, pplx::cancellation_token_source> streams GUARDED_BY(streams_mu);
  std::set<int> cancelled GUARDED_BY(streams_mu);  // cancel_stream before stream() registered: honoured on arrival
};

namespace {

http::client::http_client_config make_config(const KubeConfig& cfg, std::chrono::seconds timeout) {
  http::client::http_client_config c;
  c.set_timeout(timeout);
  c.set_validate_certificates(!cfg.insecure_skip_verify);
  const std::string ca = cfg.ca_pem, cert = cfg.client_cert_pem, key = cfg.client_key_pem;
  c.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
    if (!ca.empty()) ctx.add_certificate_authority(boost::asio::buffer(ca.data(), ca.size()));
    if (!cert.empty()) {
      ctx.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
      ctx.use_private_key(boost::asio::buffer(key.data(), key.size()), boost::asio::ssl::context::pem);
    }
  });
  return c;
}

std::string verb_of(const std::string& method, const std::string& path) {
  if (method != "GET") return method;
  if (path.find("watch=true") != std::string::npos) return "WATCH";
  // A collection path ends in a plural with no name after it; good enough: lists carry a query
  // or end in a known collection. Count GETs with '?' as LIST.
  return path.find('?') != std::string::npos ? "LIST" : "GET";
}

ApiError error_from(int status, const std::string& body, const std::string& what) {
  std::string reason, message = body;
  try {
    auto j = json::parse(body);
    reason = j.value("reason", "");
    message = j.value("message", body);
  } catch (...) {
  }
  return ApiError(status, reason, what + ": " + std::to_string(status) + " " + message);
}

}  // namespace

std::string url_encode(const std::string& s) { return percent_encode(s); }

std::string resource_path(const std::string& gv, const std::string& ns, const std::string& plural,
                          const std::string& name, const std::string& sub) {
  std::string p = (gv == "v1") ? "/api/v1" : "/apis/" + gv;
  if (!ns.empty()) p += "/namespaces/" + ns;
  p += "/" + plural;
  if (!name.empty()) p += "/" + name;
  if (!sub.empty()) p += "/" + sub;
  return p;
}

Client::Client(KubeConfig cfg, ClientOptions options)
    : cfg_(std::move(cfg)), options_(std::move(options)), impl_(std::make_unique<Impl>()),
      tokens_(options_.burst), last_refill_(std::chrono::steady_clock::now()) {
  impl_->config = make_config(cfg_, options_.timeout);
  impl_->client = std::make_unique<http::client::http_client>(cfg_.server, impl_->config);
}

Client::~Client() {
  swarm::MutexLock lock(impl_->streams_mu);
  for (auto& [id, cts] : impl_->streams) cts.cancel();
}

void Client::throttle() {
  if (options_.qps <= 0) return;
  for (;;) {
    std::chrono::duration<double> wait{0};
    {
      swarm::MutexLock lock(mu_);
      auto now = std::chrono::steady_clock::now();
      tokens_ = std::min(options_.burst,
                         tokens_ + std::chrono::duration<double>(now - last_refill_).count() * options_.qps);
      last_refill_ = now;
      if (tokens_ >= 1) {
        tokens_ -= 1;
        return;
      }
      wait = std::chrono::duration<double>((1 - tokens_) / options_.qps);
    }
    std::this_thread::sleep_for(wait);
  }
}

void Client::count(const std::string& verb, int status) {
  bool back = false;
  {
    swarm::MutexLock lock(mu_);
    ++counts_[verb];
    back = reachability_.answered(status);
  }
  if (on_request) on_request(verb, status);
  if (back && on_reachable_again) on_reachable_again();
}

std::map<std::string, std::uint64_t> Client::request_counts() const {
  swarm::MutexLock lock(mu_);
  return counts_;
}

std::uint64_t Client::total_requests() const {
  swarm::MutexLock lock(mu_);
  std::uint64_t n = 0;
  for (auto& [v, c] : counts_) n += c;
  return n;
}

json Client::call(const std::string& method, const std::string& path, const std::string& body,
                  const std::string& content_type, int* status_out) {
  throttle();
  http::http_request req(method);
  req.set_request_uri(path);
  req.headers().add("Accept", "application/json");
  req.headers().add("User-Agent", options_.user_agent);
  const std::string token = current_token(cfg_);
  if (!token.empty()) req.headers().add("Authorization", "Bearer " + token);
  if (!body.empty()) req.set_body(body, content_type);
  const std::string verb = verb_of(method, path);
  http::http_response resp;
  std::string text;
  try {
    resp = impl_->client->request(req).get();
    text = resp.extract_utf8string(true).get();
  } catch (const std::exception& e) {
    count(verb, 0);
    throw ApiError(0, "", method + " " + path + ": " + e.what());
  }
  const int status = resp.status_code();
  count(verb, status);
  if (status_out) *status_out = status;
  if (status < 200 || status >= 300) throw error_from(status, text, method + " " + path);
  if (text.empty()) return json::object();
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    throw ApiError(status, "", method + " " + path + ": unparsable answer: " + e.what());
  }
}

json Client::get(const std::string& path) { return call("GET", path, "", ""); }

std::optional<json> Client::get_if_exists(const std::string& path) {
  try {
    return get(path);
  } catch (const ApiError& e) {
    if (e.not_found()) return std::nullopt;
    throw;
  }
}

json Client::create(const std::string& path, const json& obj) {
  return call("POST", path, obj.dump(), "application/json");
}

json Client::replace(const std::string& path, const json& obj) {
  return call("PUT", path, obj.dump(), "application/json");
}

json Client::patch(const std::string& path, const json& patch, PatchType type) {
  const char* ct = type == PatchType::Merge            ? "application/merge-patch+json"
                   : type == PatchType::StrategicMerge ? "application/strategic-merge-patch+json"
                                                       : "application/json-patch+json";
  return call("PATCH", path, patch.dump(), ct);
}

bool Client::remove(const std::string& path, std::optional<int> grace, const std::string& uid) {
  json opts = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (grace) opts["gracePeriodSeconds"] = *grace;
  if (!uid.empty()) opts["preconditions"] = {{"uid", uid}};
  try {
    call("DELETE", path, opts.dump(), "application/json");
    return true;
  } catch (const ApiError& e) {
    // 404: already gone. 409 with a uid precondition: the name now belongs to another object.
    if (!e.not_found() && !(e.conflict() && !uid.empty())) throw;
    return false;
  }
}

void Client::stream(const std::string& path_and_query,
                    const std::function<bool(const std::string&)>& on_line, int stream_id,
                    std::chrono::seconds idle_timeout) {
  pplx::cancellation_token_source cts;
  {
    swarm::MutexLock lock(impl_->streams_mu);
    if (impl_->cancelled.erase(stream_id)) return;
    impl_->streams[stream_id] = cts;
  }
  struct Forget {
    Impl* impl;
    int id;
    ~Forget() {
      swarm::MutexLock lock(impl->streams_mu);
      impl->streams.erase(id);
    }
  } forget{impl_.get(), stream_id};

  // One connection per stream: a watch holds its connection for minutes.
  http::client::http_client client(cfg_.server, make_config(cfg_, idle_timeout));
  http::http_request req(http::methods::GET);
  req.set_request_uri(path_and_query);
  req.headers().add("Accept", "application/json");
  req.headers().add("User-Agent", options_.user_agent);
  const std::string token = current_token(cfg_);
  if (!token.empty()) req.headers().add("Authorization", "Bearer " + token);
  const std::string verb = verb_of("GET", path_and_query);
  try {
    auto resp = client.request(req, cts.get_token()).get();
    count(verb, resp.status_code());
    if (resp.status_code() != 200) {
      throw error_from(resp.status_code(), resp.extract_utf8string(true).get(), "GET " + path_and_query);
    }
    auto body = resp.body();
    for (;;) {
      concurrency::streams::container_buffer<std::string> line;
      body.read_line(line).get();
      if (!line.collection().empty()) {
        if (!on_line(line.collection())) return;
      } else if (body.is_eof()) {
        return;
      }
      if (cts.get_token().is_canceled()) return;
    }
  } catch (const ApiError&) {
    throw;
  } catch (const pplx::task_canceled&) {
    return;
  } catch (const std::exception& e) {
    if (cts.get_token().is_canceled()) return;
    throw ApiError(0, "", "GET " + path_and_query + ": " + e.what());
  }
}

void Client::cancel_stream(int stream_id) {
  swarm::MutexLock lock(impl_->streams_mu);
  auto it = impl_->streams.find(stream_id);
  if (it != impl_->streams.end()) {
    it->second.cancel();
  } else {
    impl_->cancelled.insert(stream_id);
  }
}

}  // namespace swarm::kube
