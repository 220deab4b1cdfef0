#include "operator/kube/events.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <optional>

#include "operator/kube/time_format.h"

namespace swarm::kube {

ObjectRef ref_of(const json& obj) {
  ObjectRef r;
  r.api_version = obj.value("apiVersion", "");
  r.kind = obj.value("kind", "");
  const auto& md = obj.at("metadata");
  r.namespace_ = md.value("namespace", "");
  r.name = md.value("name", "");
  r.uid = md.value("uid", "");
  return r;
}

EventRecorder::EventRecorder(Client& client, std::string component, std::string instance)
    : client_(client), component_(std::move(component)), instance_(std::move(instance)) {
  thread_ = std::thread([this] { run(); });
}

EventRecorder::~EventRecorder() {
  {
    swarm::MutexLock lock(mu_);
    cv_.wait_for(mu_, std::chrono::seconds(2), [this]() REQUIRES(mu_) { return queue_.empty() && !busy_; });
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void EventRecorder::record(const ObjectRef& ref, const std::string& type, const std::string& reason,
                           const std::string& message) {
  swarm::MutexLock lock(mu_);
  if (queue_.size() > 10000) return;  // the API server is unreachable: drop rather than grow
  queue_.push_back({ref, type, reason, message});
  cv_.notify_all();
}

void EventRecorder::flush() {
  swarm::MutexLock lock(mu_);
  cv_.wait_for(mu_, std::chrono::seconds(30), [this]() REQUIRES(mu_) { return queue_.empty() && !busy_; });
}

std::uint64_t EventRecorder::written() const {
  swarm::MutexLock lock(mu_);
  return written_;
}

void EventRecorder::run() {
  swarm::MutexLock lock(mu_);
  for (;;) {
    cv_.wait(mu_, [this]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      write(item);
    } catch (const std::exception& e) {
      spdlog::warn("event {} on {}/{}: {}", item.reason, item.ref.namespace_, item.ref.name, e.what());
    }
    lock.lock();
    busy_ = false;
    ++written_;
    cv_.notify_all();
  }
}

void EventRecorder::write(const Item& item) {
  const auto now = std::chrono::system_clock::now();
  const std::string key = item.ref.uid + "|" + item.type + "|" + item.reason + "|" + item.message;
  const std::string ns = item.ref.namespace_.empty() ? "default" : item.ref.namespace_;
  // A copy of the repeat's entry: the patch below runs without mu_, and seen_ may be cleared.
  std::optional<Seen> repeat;
  {
    swarm::MutexLock lock(mu_);
    auto it = seen_.find(key);
    if (it != seen_.end() && std::chrono::steady_clock::now() - it->second.first < std::chrono::minutes(10)) {
      ++it->second.count;
      repeat = it->second;
    } else if (seen_.size() > 4096) {
      seen_.clear();  // bounded memory; worst case a duplicate Event
    }
  }
  if (repeat) {
    client_.patch(resource_path("v1", ns, "events", repeat->name),
                  {{"count", repeat->count}, {"lastTimestamp", format_time(now)}});
    return;
  }
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".%llx",
                static_cast<unsigned long long>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
  const std::string name = item.ref.name + suffix;
  json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", item.ref.api_version}, {"kind", item.ref.kind}, {"namespace", item.ref.namespace_},
        {"name", item.ref.name}, {"uid", item.ref.uid}}},
      {"type", item.type},
      {"reason", item.reason},
      {"message", item.message},
      {"source", {{"component", component_}}},
      {"reportingComponent", component_},
      {"reportingInstance", instance_},
      {"firstTimestamp", format_time(now)},
      {"lastTimestamp", format_time(now)},
      {"count", 1},
  };
  client_.create(resource_path("v1", ns, "events"), ev);
  swarm::MutexLock lock(mu_);
  seen_[key] = Seen{name, 1, std::chrono::steady_clock::now()};
}

}  // namespace swarm::kube
