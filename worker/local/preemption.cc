#include "worker/local/preemption.h"

#include <algorithm>
#include <limits>

namespace swarm::runtime {

PreemptionSchedule::PreemptionSchedule(PreemptionOptions options, double start)
    : options_(options),
      rng_(options.seed),
      next_(options.every_seconds > 0 ? start + options.every_seconds : std::numeric_limits<double>::infinity()) {}

std::vector<PreemptionAction> PreemptionSchedule::due(double now, const std::vector<std::string>& alive) {
  std::vector<PreemptionAction> out;
  while (now >= next_) {
    next_ += options_.every_seconds;
    if (alive.empty()) continue;
    std::uniform_int_distribution<size_t> pick(0, alive.size() - 1);
    const std::string victim = alive[pick(rng_)];
    ++preemptions_;
    if (options_.notice_seconds > 0) {
      out.push_back({PreemptionAction::Terminate, victim});
      pending_.push_back({now + options_.notice_seconds, {PreemptionAction::Kill, victim}});
    } else {
      out.push_back({PreemptionAction::Kill, victim});
    }
    if (options_.respawn_seconds > 0)
      pending_.push_back({now + options_.respawn_seconds, {PreemptionAction::Respawn, ""}});
  }
  std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) { return a.at < b.at; });
  while (!pending_.empty() && pending_.front().at <= now) {
    out.push_back(pending_.front().action);
    pending_.erase(pending_.begin());
  }
  return out;
}

}  // namespace swarm::runtime
