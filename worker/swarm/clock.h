// Monotonic seconds, the clock every planner decision of the data plane is fed with.
#pragma once

#include <chrono>

namespace swarm::runtime {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace swarm::runtime
