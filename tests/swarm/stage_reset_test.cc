// Issue 11, "no stage is ever silently lost": a stage that comes back without its state after the
// job trained stops the job (it never trains on from its initial parameters), and a peer whose
// step the registry finished without it, with nobody ahead to download from, does not spin on
// re-syncing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>

#include "registry/registry_client.h"
#include "tests/swarm/swarm_fixture.h"
#include "worker/net/client.h"
#include "worker/swarm/protocol.h"

namespace swarm {
namespace {

int64_t event(registry::RegistryClient& reg, const char* kind) {
  return reg.stats()["events"].value(kind, int64_t{0});
}

std::string state_in_registry(registry::RegistryClient& reg, const std::string& peer) {
  for (const auto& p : reg.peers("worker"))
    if (p.peer_id == peer) return planner::to_string(p.state);
  return "";
}

// The loop of issue 11: replacement peers logged "re-synced stage 0 from step 0 to 0" every 25 ms.
// A peer is behind its stage's book (the registry finished steps it never took part in: a peer
// that went on without it and vanished, as a frozen peer finds after SIGCONT) and nobody holds a
// newer state: every retry of its step was refused as closed, it re-synced to the same step and
// retried at once, for good. Now it keeps its state (the newest left) and takes up a step the
// registry has not finished, counting the steps the stage lost.
TEST(Resync, APeerBehindItsStageWithNobodyAheadDoesNotLoop) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 3), 1);
  ASSERT_TRUE(testing::train(swarm, 3).finished);
  auto& w = *swarm.workers[0];
  const int64_t mine = w.status().step;
  ASSERT_GE(mine, 3);
  const uint64_t fingerprint = w.status().fingerprint;
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(5));
  const int64_t resyncs_before = event(reg, "resyncs");
  // Another peer of stage 0 took 8 more steps and is gone (it never announced itself: no donor).
  const int64_t target = swarm.spec.training.global_batch;
  for (int64_t r = mine; r <= mine + 8; ++r) reg.report_progress(0, r, "a-vanished-peer", target, target, target);

  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int64_t resyncs_mid = event(reg, "resyncs");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t resyncs_after = event(reg, "resyncs");
  // Before the fix: ~40 re-syncs a second, the step never moving.
  EXPECT_LE(resyncs_after - resyncs_before, 2) << "the peer keeps re-syncing";
  EXPECT_EQ(resyncs_after, resyncs_mid) << "still re-syncing after 3 s";
  const auto st = w.status();
  EXPECT_TRUE(st.ready);
  EXPECT_FALSE(st.failed);
  EXPECT_GE(st.step, mine + 8) << "it did not take up a step the registry has not finished";
  EXPECT_EQ(st.fingerprint, fingerprint) << "its parameters (the newest state left) changed";
  EXPECT_GE(event(reg, "stage_steps_lost"), 8);
  EXPECT_FALSE(reg.stats().contains("failure"));
}

// The first case: the only peer of a stage dies after the job trained, there is no
// checkpoint, and its replacement would start from the initial parameters while the other stage
// keeps its trained ones. The replacement does not serve; the job's failure (reason, stage, step,
// message) is in the registry's stats and metrics and in the worker's metrics.
TEST(StageReset, AStageBackWithoutItsStateAfterTrainingFailsTheJob) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 3), 1);
  ASSERT_TRUE(testing::train(swarm, 3).finished);
  const int64_t step = swarm.workers[1]->status().step;
  ASSERT_GE(step, 3);
  // The registry learns stage 1's step from its progress reports (every 25 ms): the failure names
  // the step the registry knows, so wait until it knows this one (it lagged by one on a loaded
  // machine: 2 vs 3).
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(5));
  const auto known = [&] {
    const auto st = reg.stats();
    return st.contains("stageSteps") ? st["stageSteps"].value("1", int64_t{-1}) : int64_t{-1};
  };
  for (int i = 0; i < 200 && known() < step; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_GE(known(), step);
  swarm.workers[0]->stop();  // stage 0's only peer is gone, and there are no checkpoints
  auto& replacement = swarm.add_worker(0, 7);
  const auto st = replacement.status();
  EXPECT_TRUE(st.failed);
  EXPECT_FALSE(st.ready);

  const auto stats = reg.stats();
  ASSERT_TRUE(stats.contains("failure")) << stats.dump();
  const auto& f = stats["failure"];
  EXPECT_EQ(f.value("reason", ""), "StageReset");
  EXPECT_EQ(f.value("stage", -1), 0);
  EXPECT_GE(f.value("step", int64_t{0}), step);
  EXPECT_NE(f.value("message", "").find("stage 0"), std::string::npos) << f.dump();
  EXPECT_EQ(state_in_registry(reg, "stage0-w7"), "failed");

  const std::string registry_metrics = testing::shell("curl -sf " + swarm.registry->url() + "/metrics").second;
  EXPECT_EQ(testing::metric_sample(registry_metrics, "swarm_job_failed"), 1) << registry_metrics;
  EXPECT_EQ(testing::metric_sample(registry_metrics, "swarm_stage_reset_total"), 1);
  EXPECT_EQ(testing::metric_sample(testing::scrape_metrics(replacement.metrics_port()), "swarm_stage_reset_total"), 1);

  // It refuses work with the reason rather than computing with initial parameters.
  net::Client c("127.0.0.1", static_cast<uint16_t>(replacement.port()), testing::kSecret);
  try {
    c.call(runtime::make_message(net::StateRequest, {{"stage", 0}}), std::chrono::seconds(10));
    ADD_FAILURE() << "a failed peer handed out its state";
  } catch (const net::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("lost its state"), std::string::npos) << e.what();
  }
  // A second replacement does not overwrite the first failure.
  swarm.add_worker(0, 8);
  EXPECT_EQ(reg.stats()["failure"], f);
  EXPECT_EQ(testing::metric_sample(testing::shell("curl -sf " + swarm.registry->url() + "/metrics").second,
                                   "swarm_stage_reset_total"),
            2);
}

// Before the first step every stage is at its initial parameters (from the seed): a stage that
// loses its peer then is not reset, and its replacement serves.
TEST(StageReset, AtStepZeroAReplacementStartsFromTheInitialParameters) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 2), 1);
  const uint64_t initial = swarm.workers[0]->status().fingerprint;
  swarm.workers[0]->stop();
  auto& replacement = swarm.add_worker(0, 7);
  EXPECT_TRUE(replacement.status().ready);
  EXPECT_FALSE(replacement.status().failed);
  EXPECT_EQ(replacement.status().fingerprint, initial);
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(5));
  EXPECT_FALSE(reg.stats().contains("failure"));
  ASSERT_TRUE(testing::train(swarm, 2).finished);
}

}  // namespace
}  // namespace swarm
