// A clock the test moves by hand, for the stage server's parts (worker/runtime/clock.h's Clock):
// `c.now += 5` is five seconds later; nothing sleeps.
#pragma once

#include "worker/runtime/clock.h"

namespace swarm::runtime {

struct FakeClock {
  explicit FakeClock(double start) : now(start) {}
  double now;
  Clock clock() {
    return [this] { return now; };
  }
};

}  // namespace swarm::runtime
