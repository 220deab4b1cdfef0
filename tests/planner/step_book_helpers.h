// Builders shared by the StepBook tests (step_book_test.cc, step_book_claims_test.cc).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "planner/peer_table.h"
#include "planner/step_book.h"

namespace swarm::planner::book_testing {

inline constexpr double kExpiry = 10;

inline PeerRecord worker(const std::string& id, int stage) {
  PeerRecord r;
  r.peer_id = id;
  r.role = "worker";
  r.stage = stage;
  r.host = "h-" + id;
  r.port = 7000;
  r.state = PeerState::Serving;
  return r;
}

inline Member member(const std::string& id, int64_t samples = 0) {
  return Member{id, "h-" + id, 7000, samples};
}

inline std::vector<std::string> ids(const std::vector<Member>& v) {
  std::vector<std::string> out;
  for (const auto& m : v) out.push_back(m.peer_id);
  return out;
}

// A stage-0 table with the given workers, all announced at t=0.
inline PeerTable table_with(std::initializer_list<const char*> workers, int stage = 0) {
  PeerTable t(kExpiry);
  for (const char* w : workers) t.upsert(worker(w, stage), 0);
  return t;
}

inline ClaimRequest ask(int64_t done, int64_t used, int64_t want, int64_t unit = 4, std::vector<Transfer> transfers = {}) {
  ClaimRequest r;
  r.done = done;
  r.used = used;
  r.want = want;
  r.unit = unit;
  r.transfers = std::move(transfers);
  return r;
}

}  // namespace swarm::planner::book_testing
