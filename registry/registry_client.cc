// cpprest otherwise defines a macro U(x), which breaks fmt (spdlog) and anything else named U.
#ifndef _TURN_OFF_PLATFORM_STRING
#define _TURN_OFF_PLATFORM_STRING
#endif

#include "registry/registry_client.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <utility>

#include <cpprest/http_client.h>

#include "common/thread_annotations.h"
#include "registry/request_auth.h"
#include "registry/wire.h"

namespace swarm::registry {
namespace {

using web::http::method;
using web::http::methods;
using web::http::client::http_client;
using web::http::client::http_client_config;
using wire::json;

struct Reply {
  int status = 0;
  std::string body;
};

std::string step_path(int stage, int64_t step) {
  return "/v1/stages/" + std::to_string(stage) + "/steps/" + std::to_string(step);
}

std::string attempt_path(int stage, int64_t step, int attempt) {
  return step_path(stage, step) + "/attempts/" + std::to_string(attempt);
}

int64_t system_unix_ms() {
  return static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// The registry's Unix ms from a reply's X-Swarm-Time; -1 when it has none (or not a number).
int64_t registry_time(const web::http::http_response& resp) {
  const auto it = resp.headers().find(auth::kTimeHeader);
  if (it == resp.headers().end() || it->second.empty() || it->second.size() > 15) return -1;
  int64_t v = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Whether a 401's body says the time stamp was out of the registry's window.
bool refused_for_time(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  return j.is_object() && j.value("reason", "") == auth::reason_label(auth::Failure::Timestamp);
}

}  // namespace

RegistryError::RegistryError(const std::string& message, int status)
    : std::runtime_error(message), status_(status) {}

struct RegistryClient::Impl {
  std::string address_file;  // "" unless constructed with "file:PATH"
  http_client_config config;
  std::string key;  // auth::registry_key(secret); "" = unsigned requests
  UnixMsClock clock;
  std::atomic<int64_t> offset_ms{0};  // the registry's clock minus ours
  swarm::Mutex mu;
  std::string base GUARDED_BY(mu);
  std::string base_path GUARDED_BY(mu);  // the base URL's path ("" for "/"): the start of every request target
  std::shared_ptr<http_client> client GUARDED_BY(mu);

  struct Current {
    std::string first;  // the base URL
    std::string path;   // its path
    std::shared_ptr<http_client> client;
  };
  Current current() EXCLUDES(mu) {
    swarm::MutexLock lk(mu);
    return {base, base_path, client};
  }
  // Points the client at `url`; throws std::invalid_argument if it is not an http(s) URL.
  void use(std::string url) EXCLUDES(mu) {
    while (!url.empty() && url.back() == '/') url.pop_back();
    web::uri uri(url);
    if ((uri.scheme() != "http" && uri.scheme() != "https") || uri.host().empty())
      throw std::invalid_argument("not an http(s) URL");
    auto c = std::make_shared<http_client>(uri, config);
    std::string path = uri.path();
    while (!path.empty() && path.back() == '/') path.pop_back();
    swarm::MutexLock lk(mu);
    base = url;
    base_path = path;
    client = std::move(c);
  }
  // The first line of the address file, trimmed; "" when it cannot be read.
  std::string read_address_file() const {
    std::ifstream f(address_file);
    std::string line;
    std::getline(f, line);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) return "";
    return line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
  }
  // After a call that did not reach the registry: the address file may name a new one.
  void follow_address_file() {
    if (address_file.empty()) return;
    const std::string url = read_address_file();
    if (url.empty() || url == current().first) return;
    try {
      use(url);
    } catch (const std::exception&) {
      // not a URL (a half-written file?): keep the one in use, read it again after the next failure
    }
  }

  // Sends one request, signed; network failures become RegistryError (status 0). A request
  // refused for its time stamp goes once more, signed on the clock that refusal reported.
  Reply call(const method& m, const std::string& path, const json* body) {
    Reply r = send_once(m, path, body);
    if (r.status == 401 && !key.empty() && refused_for_time(r.body)) r = send_once(m, path, body);
    return r;
  }

  Reply send_once(const method& m, const std::string& path, const json* body) {
    const Current cur = current();
    const std::string what = m + " " + cur.first + path;
    try {
      web::http::http_request req(m);
      req.set_request_uri(path);
      const std::string text = body != nullptr ? body->dump() : "";
      if (body != nullptr) req.set_body(text, "application/json");
      const int64_t sent = clock();
      if (!key.empty()) {
        req.headers().add(web::http::header_names::authorization,
                          auth::authorization(key, m, cur.path + path, text, sent + offset_ms.load(), auth::new_nonce()));
      }
      web::http::http_response resp = cur.client->request(req).get();
      // The registry's clock stood at its X-Swarm-Time about half-way between sending and receiving.
      if (const int64_t at = registry_time(resp); at >= 0) offset_ms.store(at - (sent + clock()) / 2);
      Reply r;
      r.status = resp.status_code();
      r.body = resp.extract_utf8string(/*ignore_content_type=*/true).get();
      return r;
    } catch (const std::exception& e) {
      follow_address_file();
      throw RegistryError("registry " + what + " failed: " + e.what(), 0);
    }
  }

  // Like call(), and a non-2xx reply (other than `tolerated`) becomes RegistryError.
  Reply checked(const method& m, const std::string& path, const json* body, int tolerated = 0) {
    Reply r = call(m, path, body);
    if ((r.status >= 200 && r.status < 300) || r.status == tolerated) return r;
    const std::string url = current().first;
    std::string detail = r.body;
    json j = json::parse(r.body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) {
      detail = j["error"].get<std::string>();
    } else if (detail.size() > 200) {
      detail = detail.substr(0, 200) + "...";
    }
    throw RegistryError("registry " + m + " " + url + path + " returned " +
                            std::to_string(r.status) + ": " + detail,
                        r.status);
  }

  // Decodes a 2xx reply with `decode`, turning malformed bodies into RegistryError.
  template <typename F>
  auto decoded(const method& m, const std::string& path, const Reply& r, F decode) {
    try {
      return decode(wire::parse_object(r.body));
    } catch (const std::exception& e) {
      throw RegistryError("registry " + m + " " + current().first + path + " returned an unreadable " +
                              std::to_string(r.status) + " reply: " + e.what(),
                          r.status);
    }
  }
};

RegistryClient::RegistryClient(std::string base_url, std::chrono::milliseconds timeout, const std::string& secret,
                               UnixMsClock unix_ms_clock)
    : impl_(std::make_unique<Impl>()) {
  impl_->config.set_timeout(timeout);
  if (!secret.empty()) impl_->key = auth::registry_key(secret);
  impl_->clock = unix_ms_clock ? std::move(unix_ms_clock) : UnixMsClock(system_unix_ms);
  if (base_url.rfind(kAddressFilePrefix, 0) == 0) {
    impl_->address_file = base_url.substr(std::string(kAddressFilePrefix).size());
    base_url = impl_->read_address_file();
    if (base_url.empty())
      throw RegistryError("registry: no URL in the address file \"" + impl_->address_file + "\"", 0);
  }
  try {
    impl_->use(base_url);
  } catch (const std::exception& e) {
    throw RegistryError("registry: bad base URL \"" + base_url + "\": " + e.what(), 0);
  }
}

std::string RegistryClient::base_url() const { return impl_->current().first; }

int64_t RegistryClient::clock_offset_ms() const { return impl_->offset_ms.load(); }

RegistryClient::~RegistryClient() = default;

AnnounceReply RegistryClient::announce(const planner::PeerRecord& rec) {
  json body = wire::to_json(rec);
  body.erase("lastSeen");
  const std::string path = "/v1/peers/" + web::uri::encode_data_string(rec.peer_id);
  Reply r = impl_->checked(methods::PUT, path, &body);
  return impl_->decoded(methods::PUT, path, r, [](const json& j) {
    AnnounceReply out;
    out.expires_in_seconds = wire::get_number_or(j, "expiresInSeconds", 0, 1e9, 0);
    out.assigned_stage = static_cast<int>(wire::get_int_or(j, "assignedStage", 0, 1 << 20, -1));
    return out;
  });
}

void RegistryClient::add_event(const std::string& kind, int64_t count) {
  json body{{"kind", kind}, {"count", count}};
  impl_->checked(methods::POST, "/v1/events", &body);
}

void RegistryClient::add_event(const LedgerEntry& entry, const std::string& peer_id) {
  json body{{"kind", entry.kind}, {"count", entry.count}, {"peerId", peer_id}, {"seq", entry.seq}};
  impl_->checked(methods::POST, "/v1/events", &body);
}

json RegistryClient::stats() {
  Reply r = impl_->checked(methods::GET, "/v1/stats", nullptr);
  return impl_->decoded(methods::GET, "/v1/stats", r, [](const json& j) { return j; });
}

void RegistryClient::report_failure(const std::string& reason, int stage, int64_t step,
                                    const std::string& message) {
  json body{{"reason", reason}, {"stage", stage}, {"step", step}, {"message", message}};
  impl_->checked(methods::POST, "/v1/failure", &body);
}

void RegistryClient::withdraw(const std::string& peer_id, bool settled) {
  const std::string path =
      "/v1/peers/" + web::uri::encode_data_string(peer_id) + (settled ? "?settled=true" : "");
  impl_->checked(methods::DEL, path, nullptr);
}

std::vector<planner::PeerRecord> RegistryClient::peers(const std::string& role, int stage) {
  std::string path = "/v1/peers";
  std::string sep = "?";
  if (!role.empty()) {
    path += sep + "role=" + web::uri::encode_data_string(role);
    sep = "&";
  }
  if (stage >= 0) path += sep + "stage=" + std::to_string(stage);
  Reply r = impl_->checked(methods::GET, path, nullptr);
  return impl_->decoded(methods::GET, path, r, [](const json& j) {
    if (!j.contains("peers") || !j.at("peers").is_array()) {
      throw wire::BadField("peers", "must be an array",
                           j.contains("peers") ? wire::describe(j.at("peers")) : "nothing");
    }
    std::vector<planner::PeerRecord> out;
    for (const json& p : j.at("peers")) out.push_back(wire::peer_from_json(p));
    return out;
  });
}

planner::ProgressView RegistryClient::report_progress(int stage, int64_t step,
                                                      const std::string& peer, int64_t samples,
                                                      int64_t target, int64_t admitted) {
  const std::string path = step_path(stage, step) + "/progress";
  const json body{{"peerId", peer}, {"samples", samples}, {"target", target},
                  {"admitted", std::max(admitted, samples)}};
  Reply r = impl_->checked(methods::POST, path, &body);
  return impl_->decoded(methods::POST, path, r, wire::progress_from_json);
}

planner::ProgressView RegistryClient::claim(int stage, int64_t step, const std::string& peer,
                                            const planner::ClaimRequest& request, int64_t target) {
  const std::string path = step_path(stage, step) + "/progress";
  json body = wire::to_json(request);
  body["peerId"] = peer;
  body["target"] = target;
  Reply r = impl_->checked(methods::POST, path, &body);
  return impl_->decoded(methods::POST, path, r, wire::progress_from_json);
}

void RegistryClient::report_dropped(int stage, int64_t step, const std::string& peer, int64_t target,
                                    int64_t dropped) {
  const std::string path = step_path(stage, step) + "/progress";
  const json body{{"peerId", peer}, {"samples", 0}, {"target", target}, {"admitted", 0}, {"dropped", dropped}};
  impl_->checked(methods::POST, path, &body);
}

bool RegistryClient::join_step(int stage, int64_t step, int attempt, const planner::Member& m,
                               double gather_seconds) {
  const std::string path = attempt_path(stage, step, attempt) + "/join";
  json body = wire::to_json(m);
  body["gatherSeconds"] = gather_seconds;
  Reply r = impl_->checked(methods::POST, path, &body, /*tolerated=*/409);
  return r.status != 409;
}

planner::GroupView RegistryClient::restore_group(int stage, int64_t step, int attempt,
                                                 const std::vector<planner::Member>& members) {
  const std::string path = attempt_path(stage, step, attempt) + "/group";
  json body{{"members", json::array()}};
  for (const auto& m : members) body["members"].push_back(wire::to_json(m));
  Reply r = impl_->checked(methods::PUT, path, &body);
  return impl_->decoded(methods::PUT, path, r, wire::group_from_json);
}

planner::GroupView RegistryClient::step_group(int stage, int64_t step, int attempt) {
  const std::string path = attempt_path(stage, step, attempt) + "/group";
  Reply r = impl_->checked(methods::GET, path, nullptr);
  return impl_->decoded(methods::GET, path, r, wire::group_from_json);
}

bool RegistryClient::healthy() {
  try {
    return impl_->call(methods::GET, "/healthz", nullptr).status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace swarm::registry
