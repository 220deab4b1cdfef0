// Monotonic seconds, the clock every planner decision of the data plane is fed with.
#pragma once

#include <chrono>
#include <functional>

namespace swarm::runtime {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// A clock handed to the parts of a stage server (request queue, activation store, capacity meter):
// now_seconds in a worker, a fake one in their unit tests, so that none of them has to sleep.
using Clock = std::function<double()>;

inline std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace swarm::runtime
