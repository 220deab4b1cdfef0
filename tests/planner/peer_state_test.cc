// PeerState: the wire names of a peer's states and their parser.
#include "planner/peer_state.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

namespace swarm::planner {
namespace {

std::string error_of(std::string_view text, std::string_view field = "state") {
  try {
    parse_peer_state(text, field);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed " << text;
  return "";
}

TEST(PeerState, EveryStateRoundTripsThroughItsName) {
  std::set<std::string> names;
  for (PeerState s : kPeerStates) {
    SCOPED_TRACE(to_string(s));
    EXPECT_EQ(parse_peer_state(to_string(s)), s);
    EXPECT_EQ(find_peer_state(to_string(s)), s);
    names.insert(to_string(s));
  }
  EXPECT_EQ(names.size(), std::size(kPeerStates));  // names are distinct
}

TEST(PeerState, NamesAreTheWireStrings) {
  EXPECT_STREQ(to_string(PeerState::Joining), "joining");
  EXPECT_STREQ(to_string(PeerState::Serving), "serving");
  EXPECT_STREQ(to_string(PeerState::Averaging), "averaging");
  EXPECT_STREQ(to_string(PeerState::Draining), "draining");
  EXPECT_STREQ(to_string(PeerState::Failed), "failed");
  EXPECT_EQ(peer_state_names(), "joining, serving, averaging, draining, failed");
}

TEST(PeerState, AnUnknownNameIsAnErrorNamingTheFieldAndTheValue) {
  EXPECT_EQ(error_of("servng"), "state: must be one of joining, serving, averaging, draining, failed, got \"servng\"");
  EXPECT_EQ(error_of("Serving", "peer.state"),
            "peer.state: must be one of joining, serving, averaging, draining, failed, got \"Serving\"");
  EXPECT_EQ(error_of(""), "state: must be one of joining, serving, averaging, draining, failed, got \"\"");
  EXPECT_EQ(error_of("a\"b\n"), "state: must be one of joining, serving, averaging, draining, failed, got \"a\\\"b\\n\"");
  const std::string long_value(200, 'x');
  const std::string e = error_of(long_value);
  EXPECT_EQ(e.substr(e.size() - 3), "...");  // the value is cut, the message stays short
  EXPECT_LT(e.size(), 200u);
  EXPECT_FALSE(find_peer_state("servng").has_value());
  EXPECT_FALSE(find_peer_state(" serving").has_value());
}

TEST(PeerState, OnlyServingAndAveragingPeersAreRoutable) {
  for (PeerState s : kPeerStates) {
    SCOPED_TRACE(to_string(s));
    EXPECT_EQ(routable(s), s == PeerState::Serving || s == PeerState::Averaging);
  }
}

}  // namespace
}  // namespace swarm::planner
