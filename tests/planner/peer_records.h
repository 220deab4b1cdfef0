// PeerRecord builders shared by the tests that announce peers to a registry.
#pragma once

#include <string>

#include "planner/peer_table.h"

namespace swarm::testing {

// A worker's heartbeat record on loopback.
inline planner::PeerRecord worker_record(const std::string& id, int stage, int port = 7000,
                                         planner::PeerState state = planner::PeerState::Serving) {
  planner::PeerRecord r;
  r.peer_id = id;
  r.role = "worker";
  r.stage = stage;
  r.host = "127.0.0.1";
  r.port = port;
  r.state = state;
  return r;
}

}  // namespace swarm::testing
