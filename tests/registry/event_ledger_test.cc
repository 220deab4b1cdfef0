// EventLedger: counts kept until the registry acknowledges them, resent with their sequence.
#include "registry/event_ledger.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace swarm::registry {
namespace {

struct FakeRegistry {
  std::vector<LedgerEntry> received;  // every send that reached it, resends included
  bool up = true;
  bool lose_reply = false;  // applies the entry but the reply never comes back
  int64_t highest = 0;
  std::map<std::string, int64_t> applied;
  void operator()(const LedgerEntry& e) {
    if (!up) throw std::runtime_error("connection refused");
    received.push_back(e);
    if (e.seq > highest) {
      highest = e.seq;
      applied[e.kind] += e.count;
    }
    if (lose_reply) throw std::runtime_error("timed out");
  }
};

TEST(EventLedger, KeepsCountsUntilTheRegistryTakesThemAndCountsEachOnce) {
  EventLedger ledger;
  FakeRegistry reg;
  auto send = [&](const LedgerEntry& e) { reg(e); };
  reg.up = false;
  ledger.add("unaveraged_steps", 1);
  ledger.add("resyncs", 2);
  EXPECT_FALSE(ledger.flush(send));
  ledger.add("unaveraged_steps", 1);  // a new entry: the first went out (it may have been applied)
  EXPECT_EQ(ledger.pending().at("unaveraged_steps"), 2);
  EXPECT_EQ(ledger.failed_sends(), 1);
  // The registry applies the first entry but its reply is lost: the resend has the same seq.
  reg.up = true;
  reg.lose_reply = true;
  EXPECT_FALSE(ledger.flush(send));
  ledger.add("unaveraged_steps", 4);  // merges into the unsent entry of its kind
  reg.lose_reply = false;
  EXPECT_TRUE(ledger.flush(send));
  EXPECT_TRUE(ledger.pending().empty());
  ASSERT_GE(reg.received.size(), 4u);
  EXPECT_EQ(reg.received[0].seq, reg.received[1].seq);  // the resend
  EXPECT_EQ(reg.applied["unaveraged_steps"], 6);
  EXPECT_EQ(reg.applied["resyncs"], 2);
  EXPECT_EQ(ledger.counted().at("unaveraged_steps"), 6);
  // Sequences only grow, in the order sent.
  for (size_t i = 1; i < reg.received.size(); ++i) EXPECT_GE(reg.received[i].seq, reg.received[i - 1].seq);
}

TEST(EventLedger, StaysBoundedWhileTheRegistryIsAway) {
  EventLedger ledger;
  auto down = [](const LedgerEntry&) { throw std::runtime_error("down"); };
  for (int i = 0; i < 10000; ++i) {
    ledger.add(i % 2 ? "handoffs" : "samples_lost", 1);
    if (i % 100 == 0) ledger.flush(down);
  }
  const auto p = ledger.pending();
  EXPECT_EQ(p.at("handoffs") + p.at("samples_lost"), 10000);
  EXPECT_EQ(p.size(), 2u);
  ledger.add("resyncs", 0);  // nothing to count
  ledger.add("resyncs", -3);
  EXPECT_EQ(ledger.pending().count("resyncs"), 0u);
}

}  // namespace
}  // namespace swarm::registry
