// Informer: a local cache of one resource kind kept current by list + watch.
//
// It lists (paged), then watches from the list's resourceVersion with allowWatchBookmarks, moving
// its resourceVersion forward with every event and bookmark. A watch that ends normally is resumed
// from the last resourceVersion; a 410 Gone (HTTP status or an ERROR event) means the history is
// compacted: it relists and reports the difference to its handlers as synthetic events, so no
// change is missed. Other failures back off exponentially (0.5 s .. 30 s) and retry.
//
// Handlers run on the informer's thread and must be quick (enqueue work, nothing more).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "operator/kube/client.h"

namespace swarm::kube {

enum class EventType { Added, Modified, Deleted };
const char* to_string(EventType t);

struct InformerOptions {
  std::string group_version;   // "v1", "swarm-operator.io/v1alpha1", ...
  std::string plural;          // "pods"
  std::string namespace_;      // "" = all namespaces
  std::string label_selector;  // "" = everything
  std::string field_selector;  // "" = everything
  int page_size = 500;
  int watch_timeout_seconds = 300;  // server ends each watch after about this long
  // Applied to every object before it is cached (after slim): keep only what readers need.
  // Must keep metadata.name, namespace and resourceVersion.
  std::function<void(json&)> transform;
};

// "ns/name" or "name" for cluster-scoped objects.
std::string object_key(const json& obj);
// Drops what the cache never needs (metadata.managedFields: often half of an object).
void slim(json& obj);
// metadata.resourceVersion as a number (0 when absent or not numeric).
std::uint64_t resource_version_number(const json& obj);

class Informer {
 public:
  // old_obj is null for Added; for Deleted, obj is the last known state.
  using Handler = std::function<void(EventType, const json& obj, const json* old_obj)>;

  Informer(Client& client, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void add_handler(Handler h);  // before start()
  void start();
  void stop();
  // True once the first list is in the cache.
  bool wait_synced(std::chrono::milliseconds timeout);
  bool synced() const { return synced_; }

  std::optional<json> get(const std::string& key) const;
  std::vector<json> list() const;
  void for_each(const std::function<void(const json&)>& fn) const;
  size_t size() const;

  // Write-through after our own create/patch: stores `obj` unless the cache already holds a newer
  // resourceVersion of it. Keeps the next reconcile from acting on a cache that lags our writes.
  void upsert(const json& obj);
  // After our own delete, for objects that vanish at once (grace 0 / never scheduled).
  void forget_if_version(const std::string& key, std::uint64_t rv);

  std::uint64_t relists() const { return relists_; }
  std::uint64_t watch_restarts() const { return watch_restarts_; }
  std::string resource_version() const;

 private:
  void run();
  void relist();
  // Returns false when the watch must relist (410).
  bool watch_once();
  void emit(EventType t, const json& obj, const json* old_obj);
  std::string base_query() const;

  Client& client_;
  InformerOptions options_;
  std::vector<Handler> handlers_;
  mutable std::mutex mu_;
  std::map<std::string, json> store_;
  std::string rv_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> relists_{0};
  std::atomic<std::uint64_t> watch_restarts_{0};
  int stream_id_ = 0;
  std::thread thread_;
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
};

}  // namespace swarm::kube
