// EventRecorder: core/v1 Events on the objects the operator manages (kubectl describe shows them).
// Writes happen on a background thread so the reconcile path never waits for them. A repeat of
// the same (object, type, reason, message) within 10 minutes bumps the existing Event's count
// instead of creating another.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <thread>

#include "common/thread_annotations.h"
#include "operator/kube/client.h"

namespace swarm::kube {

struct ObjectRef {
  std::string api_version, kind, namespace_, name, uid;
};
ObjectRef ref_of(const json& obj);

class EventRecorder {
 public:
  EventRecorder(Client& client, std::string component, std::string instance);
  ~EventRecorder();  // flushes what is queued (bounded wait), then stops

  // type: "Normal" | "Warning"; reason: CamelCase.
  void record(const ObjectRef& ref, const std::string& type, const std::string& reason,
              const std::string& message) EXCLUDES(mu_);
  // Waits until everything recorded so far is written (tests).
  void flush() EXCLUDES(mu_);
  std::uint64_t written() const EXCLUDES(mu_);

 private:
  struct Item {
    ObjectRef ref;
    std::string type, reason, message;
  };
  struct Seen {
    std::string name;
    int count = 0;
    std::chrono::steady_clock::time_point first;
  };
  void run() EXCLUDES(mu_);
  void write(const Item& item) EXCLUDES(mu_);

  Client& client_;
  std::string component_, instance_;
  mutable swarm::Mutex mu_;
  swarm::CondVar cv_;
  std::deque<Item> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::uint64_t written_ GUARDED_BY(mu_) = 0;
  std::map<std::string, Seen> seen_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace swarm::kube
