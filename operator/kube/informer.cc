#include "operator/kube/informer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <string>

#include "operator/kube/retry.h"

namespace swarm::kube {

const char* to_string(EventType t) {
  switch (t) {
    case EventType::Added: return "ADDED";
    case EventType::Modified: return "MODIFIED";
    case EventType::Deleted: return "DELETED";
  }
  return "?";
}

std::string object_key(const json& obj) {
  const auto& md = obj.at("metadata");
  std::string ns = md.value("namespace", "");
  std::string name = md.value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

void slim(json& obj) {
  if (obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object()) {
    obj["metadata"].erase("managedFields");
  }
}

std::uint64_t resource_version_number(const json& obj) {
  try {
    return std::stoull(obj.at("metadata").value("resourceVersion", "0"));
  } catch (...) {
    return 0;
  }
}

Informer::Informer(Client& client, InformerOptions options)
    : client_(client), options_(std::move(options)) {
  stream_id_ = client_.new_stream_id();
}

Informer::~Informer() { stop(); }

void Informer::add_handler(Handler h) { handlers_.push_back(std::move(h)); }

void Informer::start() {
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  stop_ = true;
  client_.cancel_stream(stream_id_);
  {
    swarm::MutexLock lock(wait_mu_);
    wait_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool Informer::wait_synced(std::chrono::milliseconds timeout) {
  swarm::MutexLock lock(wait_mu_);
  return wait_cv_.wait_for(wait_mu_, timeout, [this] { return synced_.load() || stop_.load(); }) && synced_;
}

std::optional<json> Informer::get(const std::string& key) const {
  swarm::MutexLock lock(mu_);
  auto it = store_.find(key);
  if (it == store_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::list() const {
  swarm::MutexLock lock(mu_);
  std::vector<json> out;
  out.reserve(store_.size());
  for (const auto& [k, v] : store_) out.push_back(v);
  return out;
}

void Informer::for_each(const std::function<void(const json&)>& fn) const {
  swarm::MutexLock lock(mu_);
  for (const auto& [k, v] : store_) fn(v);
}

size_t Informer::size() const {
  swarm::MutexLock lock(mu_);
  return store_.size();
}

std::string Informer::resource_version() const {
  swarm::MutexLock lock(mu_);
  return rv_;
}

void Informer::upsert(const json& in) {
  json obj = in;
  slim(obj);
  if (options_.transform) options_.transform(obj);
  const std::string key = object_key(obj);
  swarm::MutexLock lock(mu_);
  auto it = store_.find(key);
  if (it != store_.end() && resource_version_number(it->second) >= resource_version_number(obj)) return;
  store_[key] = obj;
}

void Informer::forget_if_version(const std::string& key, std::uint64_t rv) {
  swarm::MutexLock lock(mu_);
  auto it = store_.find(key);
  if (it != store_.end() && resource_version_number(it->second) <= rv) store_.erase(it);
}

void Informer::emit(EventType t, const json& obj, const json* old_obj) {
  for (auto& h : handlers_) {
    try {
      h(t, obj, old_obj);
    } catch (const std::exception& e) {
      spdlog::error("informer {}: handler failed: {}", options_.plural, e.what());
    }
  }
}

std::string Informer::base_query() const {
  std::string q;
  if (!options_.label_selector.empty()) q += "&labelSelector=" + url_encode(options_.label_selector);
  if (!options_.field_selector.empty()) q += "&fieldSelector=" + url_encode(options_.field_selector);
  return q;
}

void Informer::relist() {
  const std::string path = resource_path(options_.group_version, options_.namespace_, options_.plural);
  std::map<std::string, json> fresh;
  std::string cont, rv;
  do {
    std::string q = "?limit=" + std::to_string(options_.page_size) + base_query();
    if (!cont.empty()) q += "&continue=" + url_encode(cont);
    json page = client_.get(path + q);
    for (auto& item : page["items"]) {
      slim(item);
      if (options_.transform) options_.transform(item);
      const std::string key = object_key(item);  // before the move: `a = std::move(b)` evaluates b first
      fresh[key] = std::move(item);
    }
    cont = page["metadata"].value("continue", "");
    if (rv.empty()) rv = page["metadata"].value("resourceVersion", "");
  } while (!cont.empty() && !stop_);
  // The difference to what handlers saw, as events: a relist after 410 must not hide a deletion.
  std::vector<std::pair<EventType, std::pair<json, std::optional<json>>>> events;
  {
    swarm::MutexLock lock(mu_);
    for (auto& [k, obj] : fresh) {
      auto it = store_.find(k);
      if (it == store_.end()) {
        events.push_back({EventType::Added, {obj, std::nullopt}});
      } else if (resource_version_number(it->second) != resource_version_number(obj)) {
        events.push_back({EventType::Modified, {obj, it->second}});
      }
    }
    for (auto& [k, obj] : store_) {
      if (!fresh.count(k)) events.push_back({EventType::Deleted, {obj, std::nullopt}});
    }
    store_ = std::move(fresh);
    rv_ = rv;
  }
  ++relists_;
  if (!synced_) {
    synced_ = true;
    swarm::MutexLock lock(wait_mu_);
    wait_cv_.notify_all();
  }
  for (auto& [t, objs] : events) emit(t, objs.first, objs.second ? &*objs.second : nullptr);
}

bool Informer::watch_once() {
  const std::string path = resource_path(options_.group_version, options_.namespace_, options_.plural);
  // Spread the server-side timeouts so many watches do not all reconnect at once.
  const int timeout = options_.watch_timeout_seconds / 2 +
                      static_cast<int>(std::rand() % std::max(1, options_.watch_timeout_seconds / 2));
  const std::string q = "?watch=true&allowWatchBookmarks=true&resourceVersion=" + resource_version() +
                        "&timeoutSeconds=" + std::to_string(timeout) + base_query();
  bool gone = false;
  client_.stream(path + q, [&](const std::string& line) {
    json ev;
    try {
      ev = json::parse(line);
    } catch (...) {
      spdlog::warn("informer {}: unparsable watch line", options_.plural);
      return true;
    }
    const std::string type = ev.value("type", "");
    json& obj = ev["object"];
    slim(obj);
    if (type == "ERROR") {
      if (obj.value("code", 0) == 410) {
        gone = true;
      } else {
        spdlog::warn("informer {}: watch error: {}", options_.plural, obj.value("message", ""));
      }
      return false;
    }
    if (type == "BOOKMARK") {
      swarm::MutexLock lock(mu_);
      rv_ = obj["metadata"].value("resourceVersion", rv_);
      return true;
    }
    if (options_.transform) options_.transform(obj);
    const std::string key = object_key(obj);
    std::optional<json> old;
    {
      swarm::MutexLock lock(mu_);
      auto it = store_.find(key);
      if (it != store_.end()) old = it->second;
      if (type == "DELETED") {
        store_.erase(key);
      } else if (!old || resource_version_number(*old) <= resource_version_number(obj)) {
        store_[key] = obj;
      }
      rv_ = obj["metadata"].value("resourceVersion", rv_);
    }
    const EventType t = type == "ADDED" ? EventType::Added
                        : type == "DELETED" ? EventType::Deleted : EventType::Modified;
    emit(t, obj, old ? &*old : nullptr);
    return !stop_;
  }, stream_id_, std::chrono::seconds(timeout + 30));
  return !gone;
}

void Informer::nudge() {
  {
    swarm::MutexLock lock(wait_mu_);
    nudged_ = true;
  }
  wait_cv_.notify_all();
}

void Informer::run() {
  bool need_list = true;
  int failures = 0;
  std::minstd_rand jitter(static_cast<unsigned>(std::hash<std::string>{}(options_.plural)) ^
                          static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (!stop_) {
    try {
      if (need_list) {
        relist();
        need_list = false;
      }
      if (stop_) break;
      if (!watch_once()) {
        spdlog::info("informer {}: resourceVersion {} expired (410 Gone), relisting",
                     options_.plural, resource_version());
        need_list = true;
      }
      ++watch_restarts_;
      failures = 0;
    } catch (const ApiError& e) {
      if (stop_) break;
      if (e.gone()) {
        spdlog::info("informer {}: 410 Gone, relisting", options_.plural);
        need_list = true;
        continue;
      }
      const double delay = retry_delay(++failures, unit(jitter));
      spdlog::warn("informer {}: {} (retry in {:.1f} s)", options_.plural, e.what(), delay);
      swarm::MutexLock lock(wait_mu_);
      wait_cv_.wait_for(wait_mu_, std::chrono::duration<double>(delay), [this] { return stop_.load() || nudged_.load(); });
      if (nudged_.exchange(false)) failures = 0;
    }
  }
}

}  // namespace swarm::kube
