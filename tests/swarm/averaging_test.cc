// Peers of a stage average gradients and step together: after training, every peer of a stage
// holds bit-identical parameters, and every stage took exactly the requested steps.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <torch/torch.h>

#include "tests/swarm/swarm_fixture.h"
#include "worker/swarm/registry/registry_client.h"
#include "worker/swarm/trainer.h"

namespace swarm {
namespace {

runtime::TrainerOptions trainer_options(const testing::LocalSwarm& s, int64_t steps) {
  runtime::TrainerOptions t;
  t.spec = s.spec;
  t.peer_id = "trainer0";
  t.registry_url = s.registry->url();
  t.secret = testing::kSecret;
  t.max_steps = steps;
  t.eval_batches = 2;
  t.wait_for_peers_seconds = 20;
  return t;
}

TEST(Averaging, PeersOfAStageEndIdenticalAndStepTogether) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 3), 2);
  std::vector<uint64_t> initial;
  for (auto& w : swarm.workers) initial.push_back(w->status().fingerprint);
  // Same seed: peers of a stage start identical.
  EXPECT_EQ(initial[0], initial[1]);
  EXPECT_EQ(initial[2], initial[3]);

  std::atomic<bool> stop{false};
  runtime::Trainer trainer(trainer_options(swarm, 3));
  auto report = trainer.run(stop);
  EXPECT_TRUE(report.finished);
  EXPECT_EQ(report.steps, 3);
  EXPECT_EQ(report.microbatches_lost, 0);
  EXPECT_GE(report.samples, 3 * swarm.spec.training.global_batch);

  for (int stage = 0; stage < 2; ++stage) {
    auto a = swarm.workers[2 * stage]->status();
    auto b = swarm.workers[2 * stage + 1]->status();
    SCOPED_TRACE("stage " + std::to_string(stage));
    // Microbatches still in flight when the trainer saw step 3 may complete one more round.
    EXPECT_GE(a.round, 3);
    EXPECT_LE(a.round, 4);
    EXPECT_EQ(a.round, b.round) << "peers of a stage stepped a different number of times";
    EXPECT_EQ(a.fingerprint, b.fingerprint) << "peers of a stage diverged";
    EXPECT_NE(a.fingerprint, initial[2 * stage]) << "parameters never changed";
    // Both peers did work: the router spread microbatches over them.
    EXPECT_GT(a.samples_processed, 0);
    EXPECT_GT(b.samples_processed, 0);
  }
}

TEST(Averaging, TrainingLowersTheLossOnASinglePeerPipeline) {
  torch::set_num_threads(1);
  auto spec = testing::tiny_job(3, 12);
  spec.training.optimizer.learning_rate = 0.01;
  testing::LocalSwarm swarm(spec, 1);
  std::atomic<bool> stop{false};
  runtime::Trainer trainer(trainer_options(swarm, 12));
  auto report = trainer.run(stop);
  EXPECT_TRUE(report.finished);
  EXPECT_LT(report.loss_last, report.loss_first - 0.5) << report.to_json().dump();
  EXPECT_GT(report.eval_loss, 0);
}

// The trainer heartbeats to the registry while it trains (the operator reads its loss into
// status.loss, the rebalancer sees there is work) and withdraws when training is over.
TEST(Averaging, TrainerHeartbeatCarriesItsLossAndEndsWithTraining) {
  torch::set_num_threads(1);
  auto spec = testing::tiny_job(2, 150);  // about 2 s: several heartbeats (every 0.2 s)
  testing::LocalSwarm swarm(spec, 1);
  registry::RegistryClient client(swarm.registry->url(), std::chrono::milliseconds(2000));
  std::atomic<bool> stop{false};
  runtime::TrainerReport report;
  std::atomic<bool> returned{false};
  std::thread training([&] {
    report = runtime::Trainer(trainer_options(swarm, 150)).run(stop);
    returned = true;
  });
  planner::PeerRecord seen;
  while (!returned) {
    for (const auto& p : client.peers("trainer"))
      if (p.peer_id == "trainer0" && p.loss > 0) seen = p;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  training.join();
  ASSERT_EQ(seen.peer_id, "trainer0") << "no trainer heartbeat with a loss was seen";
  EXPECT_EQ(seen.role, "trainer");
  EXPECT_EQ(seen.state, "serving");
  EXPECT_GT(seen.samples_per_second, 0);
  EXPECT_GT(seen.loss, 0.5 * report.loss_last);   // a real training loss: same scale as the report's
  EXPECT_LT(seen.loss, 1.5 * report.loss_first);
  EXPECT_TRUE(client.peers("trainer").empty()) << "the trainer did not withdraw";
}

}  // namespace
}  // namespace swarm
