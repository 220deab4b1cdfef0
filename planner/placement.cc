#include "planner/placement.h"

#include <algorithm>
#include <map>
#include <set>

namespace swarm::planner {

const char* to_string(WorkerState s) {
  switch (s) {
    case WorkerState::Pending: return "Pending";
    case WorkerState::Unschedulable: return "Unschedulable";
    case WorkerState::Running: return "Running";
    case WorkerState::Ready: return "Ready";
  }
  return "?";
}

namespace {

struct Planner {
  const PlacementInput& in;
  PlacementPlan plan;
  std::map<std::string, const PoolInfo*> pools;
  std::set<std::string> unavailable;     // pools not to place into now
  std::vector<const WorkerInfo*> active;  // staying (not terminating, not deleted by this plan)
  std::set<int> used_slots;
  bool stealing = false;

  explicit Planner(const PlacementInput& input) : in(input) {
    for (const auto& p : in.pools) pools[p.name] = &p;
    for (const auto& w : in.workers) used_slots.insert(w.slot);
  }

  // Another pool that could take workers: overflowing makes no sense without one.
  bool has_alternative(const std::string& pool) const {
    for (const auto& p : in.pools)
      if (p.name != pool && !unavailable.count(p.name)) return true;
    return false;
  }

  int priority(const std::string& pool) const {
    auto it = pools.find(pool);
    return it == pools.end() ? -1 : it->second->priority;  // an unknown (removed) pool is least preferred
  }

  void requeue(double at) {
    if (at > in.now && (plan.requeue_at == 0 || at < plan.requeue_at)) plan.requeue_at = at;
  }

  int next_slot() {
    int s = 0;
    while (used_slots.count(s)) ++s;
    used_slots.insert(s);
    return s;
  }

  void remove(const WorkerInfo& w, int grace, const std::string& reason, bool preemption) {
    plan.deletes.push_back({w.name, grace, reason, w.pool, w.stage, preemption});
  }

  // Rules 1 and 2.
  void retire_lost_and_stuck() {
    for (const auto& p : in.pools) {
      if (p.unavailable_until > in.now) {
        unavailable.insert(p.name);
        requeue(p.unavailable_until);
      } else if (p.unavailable_until > 0) {
        plan.pool_changes.push_back({p.name, true, 0, "RetryAfterBackoff"});
      }
    }
    std::set<std::string> overflowing;
    for (const auto& w : in.workers) {
      if (w.terminating || w.notice) continue;
      if (w.state == WorkerState::Unschedulable) {
        const double deadline = w.unschedulable_since + in.unschedulable_seconds;
        if (in.now >= deadline && pools.count(w.pool) && !unavailable.count(w.pool) && has_alternative(w.pool))
          overflowing.insert(w.pool);
        else if (in.now < deadline)
          requeue(deadline);
      }
    }
    for (const auto& name : overflowing) {
      unavailable.insert(name);
      plan.pool_changes.push_back({name, false, in.now + in.retry_pool_seconds, "Unschedulable"});
      requeue(in.now + in.retry_pool_seconds);
    }
    for (const auto& w : in.workers) {
      if (w.terminating) continue;
      if (w.notice) {
        remove(w, w.notice->lost ? 0 : w.notice->grace_seconds, w.notice->reason, w.notice->reason != "PodFailed");
      } else if (w.state == WorkerState::Unschedulable && unavailable.count(w.pool)) {
        remove(w, 0, "Unschedulable", false);
      } else {
        active.push_back(&w);
      }
    }
  }

  std::vector<const WorkerInfo*> stage_workers(int stage) const {
    std::vector<const WorkerInfo*> out;
    for (auto* w : active)
      if (w->stage == stage) out.push_back(w);
    return out;
  }

  void drop_active(const std::string& name) {
    active.erase(std::remove_if(active.begin(), active.end(), [&](auto* w) { return w->name == name; }),
                 active.end());
  }

  // Rule 3.
  void retire_surplus() {
    for (int s = 0; s < in.stages; ++s) {
      auto ws = stage_workers(s);
      int ready = 0;
      for (auto* w : ws) ready += w->state == WorkerState::Ready;
      // Least preferred first: lowest priority, then not ready, then highest slot.
      std::sort(ws.begin(), ws.end(), [&](auto* a, auto* b) {
        if (priority(a->pool) != priority(b->pool)) return priority(a->pool) < priority(b->pool);
        if ((a->state == WorkerState::Ready) != (b->state == WorkerState::Ready)) return b->state == WorkerState::Ready;
        return a->slot > b->slot;
      });
      int best_ready_priority = -1;
      for (auto* w : ws)
        if (w->state == WorkerState::Ready) best_ready_priority = std::max(best_ready_priority, priority(w->pool));
      if (ready > in.per_stage) {
        int excess = static_cast<int>(ws.size()) - in.per_stage;
        for (auto* w : ws) {
          if (excess <= 0) break;
          const bool moved = priority(w->pool) < best_ready_priority;
          remove(*w, 30, moved ? "MovedBack" : "Surplus", false);
          drop_active(w->name);
          --excess;
        }
      } else if (static_cast<int>(ws.size()) > in.max_per_stage) {
        int excess = static_cast<int>(ws.size()) - in.max_per_stage;
        for (auto* w : ws) {
          if (excess <= 0) break;
          if (w->state == WorkerState::Ready) continue;
          remove(*w, 0, "Surplus", false);
          drop_active(w->name);
          --excess;
        }
      }
    }
  }

  std::map<std::string, int> pool_load() const {
    std::map<std::string, int> load;
    for (auto* w : active) ++load[w->pool];
    for (const auto& c : plan.creates) ++load[c.pool];
    return load;
  }

  // The most preferred available pool with room; nullopt when the cluster is full.
  std::optional<std::string> pick_pool(const std::string& exclude_below_priority_of = "", bool strictly_better = false) const {
    auto load = pool_load();
    const PoolInfo* best = nullptr;
    for (const auto& p : in.pools) {
      if (unavailable.count(p.name)) continue;
      if (p.max_workers >= 0 && load[p.name] >= p.max_workers) continue;
      if (strictly_better && p.priority <= priority(exclude_below_priority_of)) continue;
      if (!best || p.priority > best->priority ||
          (p.priority == best->priority && load[p.name] < load[best->name])) {
        best = &p;
      }
    }
    if (!best) return std::nullopt;
    return best->name;
  }

  std::map<int, int> stage_counts() const {
    std::map<int, int> n;
    for (int s = 0; s < in.stages; ++s) n[s] = 0;
    for (auto* w : active)
      if (w->stage >= 0 && w->stage < in.stages) ++n[w->stage];
    for (const auto& c : plan.creates) ++n[c.stage];
    return n;
  }

  // Rules 4 and 5.
  void create_missing() {
    std::vector<const DeleteWorker*> replaced;  // retired workers, paired with replacements in order
    for (const auto& d : plan.deletes)
      if (d.preemption || d.reason == "Unschedulable" || d.reason == "PodFailed") replaced.push_back(&d);
    size_t next_replaced = 0;
    const bool starving = starving_stage();
    for (;;) {
      auto counts = stage_counts();
      int emptiest = -1;
      for (auto& [s, n] : counts) {
        if (starving && ready_in(s) > 0) continue;
        if (n < in.per_stage && (emptiest < 0 || n < counts[emptiest])) emptiest = s;
      }
      if (emptiest < 0) break;
      auto pool = pick_pool();
      if (!pool) break;
      CreateWorker c{next_slot(), emptiest, *pool, "Initial", ""};
      if (next_replaced < replaced.size()) {
        const DeleteWorker* d = replaced[next_replaced++];
        c.replaces = d->name;
        c.reason = unavailable.count(d->pool) && d->pool != *pool ? "Overflow" : "Replacement";
      }
      if (!in.workers.empty() && c.replaces.empty()) c.reason = "ScaleUp";
      plan.creates.push_back(c);
    }
    // Rule 5: an empty stage takes a worker from the fullest one.
    for (;;) {
      auto counts = stage_counts();
      int empty = -1, fullest = -1;
      for (auto& [s, n] : counts) {
        if (n == 0 && empty < 0) empty = s;
        if (fullest < 0 || n > counts[fullest]) fullest = s;
      }
      if (empty < 0 || fullest < 0 || counts[fullest] <= 1) break;
      auto ws = stage_workers(fullest);
      if (ws.empty()) break;  // only planned creates there: nothing to move
      auto victim = *std::min_element(ws.begin(), ws.end(), [&](auto* a, auto* b) {
        if ((a->state == WorkerState::Ready) != (b->state == WorkerState::Ready)) return b->state == WorkerState::Ready;
        if (priority(a->pool) != priority(b->pool)) return priority(a->pool) < priority(b->pool);
        return a->slot > b->slot;
      });
      remove(*victim, 30, "Reassigned", false);
      const std::string pool = victim->pool;
      drop_active(victim->name);
      plan.creates.push_back({next_slot(), empty, pool, "Reassigned", victim->name});
      ++plan.reassignments;
    }
    // Rule 5b: a stage with no ready worker whose workers wait for capacity (unschedulable) takes
    // the capacity of a ready worker of the stage with the most ready ones: that worker goes, the
    // waiting pod gets its place. One at a time: not while any worker is still terminating.
    for (int s = 0; s < in.stages; ++s) {
      if (ready_in(s) > 0 || !waiting_for_capacity(s) || any_terminating()) continue;
      int donor = -1;
      for (int d = 0; d < in.stages; ++d)
        if (d != s && ready_in(d) >= 2 && (donor < 0 || ready_in(d) > ready_in(donor))) donor = d;
      if (donor < 0) continue;
      const WorkerInfo* victim = nullptr;
      for (auto* w : stage_workers(donor)) {
        if (w->state != WorkerState::Ready) continue;
        if (!victim || priority(w->pool) < priority(victim->pool) ||
            (priority(w->pool) == priority(victim->pool) && w->slot > victim->slot))
          victim = w;
      }
      remove(*victim, 30, "Reassigned", false);
      drop_active(victim->name);
      ++plan.reassignments;
      stealing = true;
      break;
    }
  }

  int ready_in(int stage) const {
    int n = 0;
    for (auto* w : active) n += w->stage == stage && w->state == WorkerState::Ready;
    return n;
  }

  bool waiting_for_capacity(int stage) const {
    for (auto* w : active)
      if (w->stage == stage && w->state == WorkerState::Unschedulable) return true;
    return false;
  }

  bool any_terminating() const {
    for (const auto& w : in.workers)
      if (w.terminating) return true;
    return !plan.deletes.empty();
  }

  // While a stage has no ready worker and waits for capacity, new pods for other stages would
  // only compete with it for that capacity.
  bool starving_stage() const {
    for (int s = 0; s < in.stages; ++s)
      if (ready_in(s) == 0 && waiting_for_capacity(s)) return true;
    return false;
  }

  // Rule 6.
  void move_back() {
    if (!plan.creates.empty() || !plan.deletes.empty()) return;
    for (auto* w : active)
      if (w->state != WorkerState::Ready) return;  // one move at a time, only when settled
    std::vector<const WorkerInfo*> ws = active;
    std::sort(ws.begin(), ws.end(), [&](auto* a, auto* b) {
      if (priority(a->pool) != priority(b->pool)) return priority(a->pool) < priority(b->pool);
      return a->slot > b->slot;
    });
    auto counts = stage_counts();
    for (auto* w : ws) {
      if (counts[w->stage] >= in.max_per_stage) continue;
      auto pool = pick_pool(w->pool, true);
      if (!pool) continue;
      plan.creates.push_back({next_slot(), w->stage, *pool, "MoveBack", w->name});
      return;
    }
  }
};

}  // namespace

PlacementPlan plan_workers(const PlacementInput& in) {
  Planner p(in);
  p.retire_lost_and_stuck();
  p.retire_surplus();
  p.create_missing();
  p.move_back();
  return std::move(p.plan);
}

}  // namespace swarm::planner
