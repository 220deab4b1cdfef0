// How long a watch or list waits before it tries the API server again (pure). Capped low: after the
// API server restarts, the operator acts on events again within seconds (issue 29: with a 30 s cap,
// it acted on nothing for up to 30 s after the server came back). Jittered, so the operator's
// informers (and several operators) do not all come back in the same instant.
#pragma once

#include <algorithm>
#include <cmath>

namespace swarm::kube {

inline constexpr double kRetryFirstSeconds = 0.5;
inline constexpr double kRetryCapSeconds = 5.0;

// The wait before the retry after `failures` failures in a row (1: the first): 0.5 s doubling up to
// `cap`, times a jitter in [0.8, 1.2) from `unit` in [0, 1) (clamped).
inline double retry_delay(int failures, double unit, double cap = kRetryCapSeconds) {
  const double base = std::min(cap, kRetryFirstSeconds * std::pow(2.0, std::clamp(failures, 1, 30) - 1));
  return base * (0.8 + 0.4 * std::clamp(unit, 0.0, 0.999999));
}

// Whether the API server is being reached, from the answers requests get (pure; not thread-safe:
// the Client guards it). A request that got no answer (status 0: refused, reset, timed out) or a
// 5xx starts an unreachable spell; the first answer below 500 after it ends the spell, and
// answered() returns true for it alone: the moment to wake every retry that is backing off, so
// the operator acts again at once rather than after its backoff (issue 29).
class Reachability {
 public:
  bool answered(int status) {
    if (status <= 0 || status >= 500) {
      unreachable_ = true;
      return false;
    }
    const bool back = unreachable_;
    unreachable_ = false;
    return back;
  }
  bool unreachable() const { return unreachable_; }

 private:
  bool unreachable_ = false;
};

}  // namespace swarm::kube
