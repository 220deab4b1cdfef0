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

int desired_workers(const PlacementInput& in, int stage) {
  return in.stage_targets.empty() ? in.per_stage : in.stage_targets.at(static_cast<size_t>(stage));
}

int most_workers(const PlacementInput& in, int stage) {
  return in.stage_targets.empty() ? in.max_per_stage : in.stage_targets.at(static_cast<size_t>(stage));
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
  // Capacity (when known): free worker slots per usable node, which nodes each pool admits, and the
  // active workers not bound to a node that found no slot (waiting or stranded).
  std::map<std::string, int> node_free;
  std::map<std::string, std::vector<std::string>> pool_nodes;
  std::set<std::string> waiting;

  explicit Planner(const PlacementInput& input) : in(input) {
    for (const auto& p : in.pools) pools[p.name] = &p;
    for (const auto& w : in.workers) used_slots.insert(w.slot);
    if (in.capacity) {
      for (const auto& n : *in.capacity) {
        node_free[n.name] = std::max(0, n.free);
        for (const auto& p : n.pools) pool_nodes[p].push_back(n.name);
      }
      // A terminating worker's slot is free as soon as it exits (its requests still count now).
      for (const auto& w : in.workers)
        if (w.terminating && node_free.count(w.node)) ++node_free[w.node];
    }
  }

  bool capacity_known() const { return in.capacity.has_value(); }

  bool autoscaled(const std::string& pool) const {
    auto it = pools.find(pool);
    return it != pools.end() && it->second->autoscaled;
  }

  int free_in(const std::string& pool) const {
    if (!capacity_known()) return kMaxSlotsPerNode;
    int n = 0;
    auto it = pool_nodes.find(pool);
    if (it == pool_nodes.end()) return 0;
    for (const auto& node : it->second) n += node_free.at(node);
    return n;
  }

  // Takes one free slot of `pool` (on its node with the most free slots: the scheduler's
  // least-allocated spreading); false when it has none.
  bool take_slot(const std::string& pool) {
    if (!capacity_known()) return true;
    auto it = pool_nodes.find(pool);
    if (it == pool_nodes.end()) return false;
    std::string best;
    for (const auto& node : it->second)
      if (node_free[node] > 0 && (best.empty() || node_free[node] > node_free[best])) best = node;
    if (best.empty()) return false;
    --node_free[best];
    return true;
  }

  // Free slots any available pool with room under maxWorkers could use (each node once).
  int free_anywhere(const std::string& except_pool = "") const {
    auto load = pool_load();
    std::set<std::string> nodes;
    for (const auto& p : in.pools) {
      if (p.name == except_pool || unavailable.count(p.name)) continue;
      if (p.max_workers >= 0 && load[p.name] >= p.max_workers) continue;
      auto it = pool_nodes.find(p.name);
      if (it != pool_nodes.end()) nodes.insert(it->second.begin(), it->second.end());
    }
    int n = 0;
    for (const auto& node : nodes) n += node_free.at(node);
    return n;
  }

  // Another pool that could take workers: overflowing makes no sense without one.
  bool has_alternative(const std::string& pool) const {
    for (const auto& p : in.pools)
      if (p.name != pool && !unavailable.count(p.name) && (!capacity_known() || free_in(p.name) > 0 || p.autoscaled))
        return true;
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
    if (capacity_known() && !w.node.empty() && node_free.count(w.node)) ++node_free[w.node];
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
      if (ready > desired_workers(in, s)) {
        int excess = static_cast<int>(ws.size()) - desired_workers(in, s);
        for (auto* w : ws) {
          if (excess <= 0) break;
          const bool moved = priority(w->pool) < best_ready_priority;
          remove(*w, 30, moved ? "MovedBack" : "Surplus", false);
          drop_active(w->name);
          --excess;
        }
      } else if (static_cast<int>(ws.size()) > most_workers(in, s)) {
        int excess = static_cast<int>(ws.size()) - most_workers(in, s);
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

  struct Choice {
    std::string pool;
    std::string why;
    bool has_slot = true;
  };

  std::string slots_text(const std::string& pool) const {
    const int n = free_in(pool);
    return std::to_string(n) + " free slot" + (n == 1 ? "" : "s");
  }

  // The pool for a new worker: the most preferred available one with room under maxWorkers that
  // can take it now (a free slot, or autoscaled unless `now_only`); equal priorities share (fewest
  // workers first). `better_than`: only pools preferred to that one (move-back). With no such pool
  // and !now_only, the most preferred available pool with room under maxWorkers (the worker waits).
  std::optional<Choice> choose_pool(bool now_only = false, const std::string& better_than = "") {
    auto load = pool_load();
    auto better = [&](const PoolInfo* a, const PoolInfo* b) {
      return !b || a->priority > b->priority || (a->priority == b->priority && load[a->name] < load[b->name]);
    };
    const PoolInfo *best = nullptr, *fallback = nullptr;
    std::vector<std::pair<const PoolInfo*, std::string>> passed;
    for (const auto& p : in.pools) {
      if (!better_than.empty() && p.priority <= priority(better_than)) continue;
      if (unavailable.count(p.name)) {
        passed.push_back({&p, "unavailable (unschedulable) until its retry time"});
        continue;
      }
      if (p.max_workers >= 0 && load[p.name] >= p.max_workers) {
        passed.push_back({&p, "at maxWorkers " + std::to_string(p.max_workers)});
        continue;
      }
      if (better(&p, fallback)) fallback = &p;
      if (free_in(p.name) <= 0 && (now_only || !p.autoscaled)) {
        passed.push_back({&p, "no free slot"});
        continue;
      }
      if (better(&p, best)) best = &p;
    }
    // With capacity known, a worker no pool can take now is not created: it would only compete
    // for the next free slot with the stages that need it more (the next node or pod event
    // reconciles again). Unknown capacity: the most preferred pool with room under maxWorkers.
    const PoolInfo* chosen = best ? best : (now_only || capacity_known() ? nullptr : fallback);
    if (!chosen) return std::nullopt;
    Choice c{chosen->name, "", take_slot(chosen->name)};
    if (capacity_known()) {
      std::string why;
      for (const auto& [p, reason] : passed)
        if (p->priority >= chosen->priority && p != chosen) why += (why.empty() ? "" : "; ") + p->name + ": " + reason;
      const std::string name = chosen->name.empty() ? "(any)" : chosen->name;
      std::string mine;
      if (c.has_slot) mine = name + " had " + std::to_string(free_in(chosen->name) + 1) + " free slot(s)";
      else mine = name + " is autoscaled: no free slot now, the pending pod asks for a node";
      c.why = why.empty() ? mine : why + "; " + mine;
    }
    return c;
  }

  std::map<int, int> stage_counts() const {
    std::map<int, int> n;
    for (int s = 0; s < in.stages; ++s) n[s] = 0;
    for (auto* w : active)
      if (w->stage >= 0 && w->stage < in.stages) ++n[w->stage];
    for (const auto& c : plan.creates) ++n[c.stage];
    return n;
  }

  // Workers of each stage that serve or will as soon as they start: bound to a node, or holding a
  // free slot (with capacity unknown: every worker).
  std::map<int, int> serving_counts() const {
    std::map<int, int> n;
    for (int s = 0; s < in.stages; ++s) n[s] = 0;
    for (auto* w : active)
      if (w->stage >= 0 && w->stage < in.stages && !waiting.count(w->name)) ++n[w->stage];
    for (const auto& c : plan.creates)
      if (!c.waits) ++n[c.stage];
    return n;
  }

  void create(int stage, const Choice& choice, const std::string& reason, const std::string& replaces) {
    plan.creates.push_back({next_slot(), stage, choice.pool, reason, replaces, choice.why, !choice.has_slot});
  }

  // Capacity: every active worker not yet bound takes a free slot of its pool; those that find none
  // wait. Pods the scheduler has not judged yet first, then by slot (oldest first).
  void take_slots_of_pending() {
    if (!capacity_known()) return;
    std::vector<const WorkerInfo*> pending;
    for (auto* w : active)
      if (w->node.empty()) pending.push_back(w);
    std::sort(pending.begin(), pending.end(), [](auto* a, auto* b) {
      const bool ua = a->state == WorkerState::Unschedulable, ub = b->state == WorkerState::Unschedulable;
      return ua != ub ? !ua : a->slot < b->slot;
    });
    for (auto* w : pending)
      if (!take_slot(w->pool)) waiting.insert(w->name);
  }

  // Rule 2b: stranded workers move at once to where a slot is free (no more of them than there are
  // free slots, so their replacements never wait in turn). Those of the least served stages first.
  void retire_stranded() {
    if (!capacity_known()) return;
    auto serving = serving_counts();
    std::vector<const WorkerInfo*> stranded;
    for (auto* w : active)
      if (waiting.count(w->name) && w->state == WorkerState::Unschedulable && !autoscaled(w->pool) && pools.count(w->pool))
        stranded.push_back(w);
    std::sort(stranded.begin(), stranded.end(), [&](auto* a, auto* b) {
      return serving[a->stage] != serving[b->stage] ? serving[a->stage] < serving[b->stage] : a->slot < b->slot;
    });
    int budget = free_anywhere();
    for (auto* w : stranded) {
      if (budget <= 0) break;
      --budget;
      remove(*w, 0, "NoCapacity", false);
      waiting.erase(w->name);
      drop_active(w->name);
    }
  }

  // Rules 4 and 5.
  void create_missing() {
    std::vector<const DeleteWorker*> replaced;  // retired workers, paired with replacements in order
    for (const auto& d : plan.deletes)
      if (d.preemption || d.reason == "Unschedulable" || d.reason == "NoCapacity" || d.reason == "PodFailed")
        replaced.push_back(&d);
    size_t next_replaced = 0;
    const bool starving = !capacity_known() && starving_stage();
    for (;;) {
      auto counts = stage_counts();
      auto serving = serving_counts();
      int emptiest = -1;
      for (auto& [s, n] : counts) {
        if (starving && ready_in(s) > 0) continue;
        if (n >= desired_workers(in, s)) continue;
        if (emptiest < 0 || serving[s] < serving[emptiest] || (serving[s] == serving[emptiest] && n < counts[emptiest]))
          emptiest = s;
      }
      if (emptiest < 0) break;
      auto choice = choose_pool();
      if (!choice) break;
      std::string reason = "Initial", replaces;
      if (next_replaced < replaced.size()) {
        const DeleteWorker* d = replaced[next_replaced++];
        replaces = d->name;
        reason = unavailable.count(d->pool) && d->pool != choice->pool ? "Overflow" : "Replacement";
      }
      if (!in.workers.empty() && replaces.empty()) reason = "ScaleUp";
      create(emptiest, *choice, reason, replaces);
    }
    if (capacity_known()) {
      add_surge_workers();
      fill_empty_stages();
      return;
    }
    // Rule 5 (capacity unknown): an empty stage takes a worker from the fullest one.
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
      plan.creates.push_back({next_slot(), empty, pool, "Reassigned", victim->name, "", false});
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

  // Rule 4b: no stage below minPerStage serving workers while a pool has a free slot.
  void add_surge_workers() {
    for (;;) {
      auto counts = stage_counts();
      auto serving = serving_counts();
      int neediest = -1;
      for (auto& [s, n] : serving)
        if (n < in.min_per_stage && counts[s] < most_workers(in, s) && (neediest < 0 || n < serving[neediest]))
          neediest = s;
      if (neediest < 0) break;
      auto choice = choose_pool(true);
      if (!choice) break;
      choice->why = "stage " + std::to_string(neediest) + " has " + std::to_string(serving[neediest]) +
                    " serving worker(s), fewer than minPerStage " + std::to_string(in.min_per_stage) +
                    " while its other workers wait for a node; " + choice->why;
      create(neediest, *choice, "Surge", "");
    }
  }

  // Rule 5': a stage with no serving worker and no free slot anywhere takes a ready worker of the
  // stage with the most serving ones; the stage's worker gets the slot it frees, in this pass.
  void fill_empty_stages() {
    for (;;) {
      auto serving = serving_counts();
      int empty = -1, donor = -1;
      for (auto& [s, n] : serving) {
        if (n == 0 && empty < 0) empty = s;
        if (donor < 0 || n > serving[donor]) donor = s;
      }
      if (empty < 0 || donor < 0 || serving[donor] < 2 || free_anywhere() > 0) break;
      const WorkerInfo* victim = nullptr;
      for (auto* w : stage_workers(donor)) {
        if (w->state != WorkerState::Ready || waiting.count(w->name)) continue;
        if (!victim || priority(w->pool) < priority(victim->pool) ||
            (priority(w->pool) == priority(victim->pool) && w->slot > victim->slot))
          victim = w;
      }
      if (!victim) break;  // only pending workers there: nothing to take yet
      const WorkerInfo taken = *victim;
      remove(taken, 30, "Reassigned", false);
      drop_active(taken.name);
      ++plan.reassignments;
      const std::string why = "stage " + std::to_string(empty) + " had no serving worker and no pool a free slot: " +
                              "took the slot of " + taken.name + " (stage " + std::to_string(donor) + ")";
      // A waiting worker of the empty stage in that pool takes the slot (one planned in this
      // pass, or an existing one); else a new one does.
      bool given = false;
      for (auto& c : plan.creates) {
        if (c.stage != empty || !c.waits || c.pool != taken.pool || !take_slot(taken.pool)) continue;
        c.waits = false;
        c.why = why;
        given = true;
        break;
      }
      for (auto* w : stage_workers(empty)) {
        if (given) break;
        if (!waiting.count(w->name) || w->pool != taken.pool || !take_slot(taken.pool)) continue;
        waiting.erase(w->name);
        given = true;
      }
      if (given) continue;
      auto counts = stage_counts();
      if (counts[empty] >= most_workers(in, empty)) {
        // Make room under maxPerStage: one of its waiting workers goes.
        for (auto* w : stage_workers(empty)) {
          if (!waiting.count(w->name)) continue;
          remove(*w, 0, "NoCapacity", false);
          waiting.erase(w->name);
          drop_active(w->name);
          break;
        }
      }
      Choice c{taken.pool, why, take_slot(taken.pool)};
      create(empty, c, "Reassigned", taken.name);
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
      if (counts[w->stage] >= most_workers(in, w->stage)) continue;
      auto choice = choose_pool(true, w->pool);
      if (!choice) continue;
      create(w->stage, *choice, "MoveBack", w->name);
      return;
    }
  }
};

}  // namespace

PlacementPlan plan_workers(const PlacementInput& in) {
  Planner p(in);
  p.retire_lost_and_stuck();
  p.retire_surplus();
  p.take_slots_of_pending();
  p.retire_stranded();
  p.create_missing();
  p.move_back();
  return std::move(p.plan);
}

}  // namespace swarm::planner
