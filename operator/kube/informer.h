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
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"
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
  void stop() EXCLUDES(wait_mu_);
  // Ends a retry backoff now and restarts it from its first step (the API server answers again).
  void nudge() EXCLUDES(wait_mu_);
  // True once the first list is in the cache.
  bool wait_synced(std::chrono::milliseconds timeout) EXCLUDES(wait_mu_);
  bool synced() const { return synced_; }

  std::optional<json> get(const std::string& key) const EXCLUDES(mu_);
  std::vector<json> list() const EXCLUDES(mu_);
  // Calls fn with the cache locked: fn must not call back into this informer.
  void for_each(const std::function<void(const json&)>& fn) const EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

  // Write-through after our own create/patch: stores `obj` unless the cache already holds a newer
  // resourceVersion of it. Keeps the next reconcile from acting on a cache that lags our writes.
  void upsert(const json& obj) EXCLUDES(mu_);
  // After our own delete, for objects that vanish at once (grace 0 / never scheduled).
  void forget_if_version(const std::string& key, std::uint64_t rv) EXCLUDES(mu_);

  std::uint64_t relists() const { return relists_; }
  std::uint64_t watch_restarts() const { return watch_restarts_; }
  std::string resource_version() const EXCLUDES(mu_);

 private:
  void run() EXCLUDES(mu_, wait_mu_);
  void relist() EXCLUDES(mu_, wait_mu_);
  // Returns false when the watch must relist (410).
  bool watch_once() EXCLUDES(mu_);
  // Runs the handlers without any lock held (they may read this informer).
  void emit(EventType t, const json& obj, const json* old_obj) EXCLUDES(mu_);
  std::string base_query() const;

  Client& client_;
  InformerOptions options_;
  std::vector<Handler> handlers_;
  mutable swarm::Mutex mu_;
  std::map<std::string, json> store_ GUARDED_BY(mu_);
  std::string rv_ GUARDED_BY(mu_);
  std::atomic<bool> synced_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> nudged_{false};
  std::atomic<std::uint64_t> relists_{0};
  std::atomic<std::uint64_t> watch_restarts_{0};
  int stream_id_ = 0;
  std::thread thread_;
  // wait_cv_ wakes wait_synced() and the retry backoff in run(); it guards no data (synced_ and
  // stop_ are atomics, set before the notify under wait_mu_ so no wake-up is lost).
  swarm::Mutex wait_mu_;
  swarm::CondVar wait_cv_;
};

}  // namespace swarm::kube
