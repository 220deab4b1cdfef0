// The interfaces the data plane uses to find peers and to coordinate each step's averaging. The HTTP
// registry (RegistryClient) implements both today; a Kubernetes-backed implementation can later.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/peer_table.h"
#include "planner/step_book.h"

namespace swarm::registry {

// What the registry answers a heartbeat with.
struct AnnounceReply {
  double expires_in_seconds = 0;
  int assigned_stage = -1;  // >= 0: the rebalancer moved this worker to that stage
};

class Discovery {
 public:
  virtual ~Discovery();
  // Publishes (or refreshes: call it as a heartbeat) this peer's record.
  virtual AnnounceReply announce(const planner::PeerRecord& rec) = 0;
  // Removes the peer at once. `settled`: the peer itself leaves (graceful shutdown) and has handed
  // off or counted its gradient; false: someone withdraws a peer that died, and whatever gradient
  // it held unaveraged is counted as lost.
  virtual void withdraw(const std::string& peer_id, bool settled) = 0;
  // Live peers, optionally filtered by role ("" = any) and stage (-1 = any), sorted by peer_id.
  virtual std::vector<planner::PeerRecord> peers(const std::string& role = "", int stage = -1) = 0;
};

class StepCoordinator {
 public:
  virtual ~StepCoordinator();
  // `samples`: done this step; `admitted`: done + accepted forwards still owed a backward (>=
  // samples), which becomes the peer's claim. The view's samples_total sums the stage's claims
  // (planner/step_book.h).
  virtual planner::ProgressView report_progress(int stage, int64_t step, const std::string& peer,
                                                int64_t samples, int64_t target,
                                                int64_t admitted) = 0;
  // The same counts with a claim (planner/step_book.h, Claims): the view's `granted` is the
  // peer's share of the step it may admit work under.
  virtual planner::ProgressView claim(int stage, int64_t step, const std::string& peer,
                                      const planner::ClaimRequest& request, int64_t target) = 0;
  // false = the group is closed (ready without this peer): retry with the next attempt.
  virtual bool join_step(int stage, int64_t step, int attempt, const planner::Member& m,
                         double gather_seconds) = 0;
  virtual planner::GroupView step_group(int stage, int64_t step, int attempt) = 0;
  // A member re-tells the frozen members of a group it saw Ready (for a registry restarted since);
  // returns the group as the registry holds it afterwards.
  virtual planner::GroupView restore_group(int stage, int64_t step, int attempt,
                                           const std::vector<planner::Member>& members) = 0;
};

}  // namespace swarm::registry
