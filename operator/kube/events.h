// EventRecorder: core/v1 Events on the objects the operator manages (kubectl describe shows them).
// Writes happen on a background thread so the reconcile path never waits for them. A repeat of
// the same (object, type, reason, message) within 10 minutes bumps the existing Event's count
// instead of creating another.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

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
              const std::string& message);
  // Waits until everything recorded so far is written (tests).
  void flush();
  std::uint64_t written() const;

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
  void run();
  void write(const Item& item);

  Client& client_;
  std::string component_, instance_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::uint64_t written_ = 0;
  std::map<std::string, Seen> seen_;
  std::thread thread_;
};

}  // namespace swarm::kube
