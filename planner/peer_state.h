// PeerState: what a peer announces about itself in its heartbeat. The registry's wire
// (registry/wire.cc) is where the state is text: it parses it once as JSON enters and writes it
// back as JSON leaves, with the same strings as before ("joining", "serving", ...); everything
// inside (the PeerTable, the StepBook, the workers, trainers and the operator) uses the enum.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace swarm::planner {

enum class PeerState {
  Joining,    // downloading its stage's state (or re-syncing): not routed to, holds no gradient
  Serving,    // computes forwards and backwards
  Averaging,  // serving while its stage's step averages
  Draining,   // leaving (moved or preempted): takes no new work, hands off what it holds
  Failed,     // its stage came back without state: serves nothing
};

// Every state, in declaration order.
inline constexpr PeerState kPeerStates[] = {PeerState::Joining, PeerState::Serving, PeerState::Averaging,
                                            PeerState::Draining, PeerState::Failed};

// The wire name: "joining" | "serving" | "averaging" | "draining" | "failed".
const char* to_string(PeerState s);

// The wire names of every state, comma separated: "joining, serving, averaging, draining, failed".
const std::string& peer_state_names();

// The state named `text` (exact, lower case), or nothing.
std::optional<PeerState> find_peer_state(std::string_view text) noexcept;

// The state named `text`. Otherwise throws std::invalid_argument naming the field and the value:
//   state: must be one of joining, serving, averaging, draining, failed, got "servng"
// (the registry's wire answers an announce with a bad state with this text).
PeerState parse_peer_state(std::string_view text, std::string_view field = "state");

// Whether trainers route work to a peer in this state (serving or averaging).
constexpr bool routable(PeerState s) { return s == PeerState::Serving || s == PeerState::Averaging; }

}  // namespace swarm::planner
