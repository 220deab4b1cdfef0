// Peers of a stage average gradients and step together: after training, every peer of a stage
// holds bit-identical parameters, and every stage took exactly the requested steps.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include <torch/torch.h>

#include "registry/registry_client.h"
#include "tests/stage/swarm_fixture.h"
#include "common/ports.h"
#include "worker/model/stage.h"
#include "worker/net/client.h"
#include "worker/runtime/job_model.h"
#include "worker/runtime/protocol.h"
#include "worker/runtime/tensor_wire.h"
#include "worker/trainer/trainer.h"

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

void expect_peers_end_identical_and_step_together(const JobSpec& spec) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(spec, 2);
  std::vector<uint64_t> initial;
  for (auto& w : swarm.workers) initial.push_back(w->status().fingerprint);
  // Same seed: peers of a stage start identical.
  EXPECT_EQ(initial[0], initial[1]);
  EXPECT_EQ(initial[2], initial[3]);

  std::atomic<bool> stop{false};
  runtime::Trainer trainer(trainer_options(swarm, 3));
  auto report = trainer.run(stop);
  EXPECT_TRUE(report.finished);
  // Microbatches in flight when the trainer saw step 3 may complete one more step, which the peers
  // average and take one after the other: wait (bounded) until each stage's two peers agree.
  EXPECT_GE(report.steps, 3);
  EXPECT_LE(report.steps, 4);
  EXPECT_EQ(report.microbatches_lost, 0);
  EXPECT_GE(report.samples, 3 * swarm.spec.training.global_batch);
  const auto settle_until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (int stage = 0; stage < 2; ++stage) {
    while (std::chrono::steady_clock::now() < settle_until) {
      const auto a = swarm.workers[2 * stage]->status(), b = swarm.workers[2 * stage + 1]->status();
      if (a.step == b.step && a.fingerprint == b.fingerprint) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  for (int stage = 0; stage < 2; ++stage) {
    auto a = swarm.workers[2 * stage]->status();
    auto b = swarm.workers[2 * stage + 1]->status();
    SCOPED_TRACE("stage " + std::to_string(stage));
    // Microbatches still in flight when the trainer saw step 3 may complete one more step.
    EXPECT_GE(a.step, 3);
    EXPECT_LE(a.step, 4);
    EXPECT_EQ(a.step, b.step) << "peers of a stage stepped a different number of times";
    EXPECT_EQ(a.fingerprint, b.fingerprint) << "peers of a stage diverged";
    EXPECT_NE(a.fingerprint, initial[2 * stage]) << "parameters never changed";
    // Both peers did work: the router spread microbatches over them.
    EXPECT_GT(a.samples_processed, 0);
    EXPECT_GT(b.samples_processed, 0);
  }
}

TEST(Averaging, PeersOfAStageEndIdenticalAndStepTogether) {
  expect_peers_end_identical_and_step_together(testing::tiny_job(2, 3));
}

// Compressed on the wire, activations and averaged gradients alike: the leader steps with the
// average as the members decode it, so the peers still end bit-identical.
TEST(Averaging, PeersStayIdenticalWithCompressedActivationsAndGradients) {
  for (auto c : {Compression::Blockwise8, Compression::Fp16}) {
    SCOPED_TRACE(to_string(c));
    JobSpec spec = testing::tiny_job(2, 3);
    spec.pipeline.compression = spec.averaging.compression = c;
    spec.pipeline.block_size = 64;
    spec.averaging.block_size = 1000;
    expect_peers_end_identical_and_step_together(spec);
  }
}

// The leader of a stage's averaging group dies after the group formed: a peer that joined step 0
// as its lowest id (so its leader) and then answers nothing, as a SIGKILLed worker would. The live
// peers' pushes to it fail, they retry the step with a new group without it, and the stage goes on
// stepping together: no deadlock, no step without averaging, no divergence.
TEST(Averaging, ALeaderKilledMidStepDoesNotDeadlockTheStage) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 3), 2);
  registry::RegistryClient client(swarm.registry->url(), std::chrono::seconds(2), testing::kSecret);
  planner::PeerRecord ghost;
  ghost.peer_id = "a-dead-leader";  // sorts before stage0-w0/w1: it leads the group
  ghost.role = "worker";
  ghost.stage = 0;
  ghost.host = "127.0.0.1";
  ghost.port = runtime::pick_free_port();  // nothing listens there
  ghost.state = planner::PeerState::Serving;
  client.announce(ghost);

  std::atomic<bool> joined{false}, stop_ghost{false};
  std::thread ghost_thread([&] {
    // Live (heartbeating) while it joins step 0's group as soon as a real peer opened it and until
    // that group is formed (Ready, with it as the leader), then silent, like a process killed
    // mid-step. (Silent from the join on, it could expire before a loaded machine formed the
    // group, and the group formed without it: nothing of what this test is about happened.)
    auto last_announce = std::chrono::steady_clock::now();
    while (!stop_ghost) {
      const auto state = client.step_group(0, 0, 0).state;
      if (joined && state == planner::GroupView::Ready) break;
      if (!joined && state != planner::GroupView::Unknown) {
        joined = client.join_step(0, 0, 0, {ghost.peer_id, ghost.host, ghost.port, 4},
                                  swarm.spec.timeouts.averaging_seconds / 2);
        if (!joined) break;
      }
      if (std::chrono::steady_clock::now() - last_announce > std::chrono::milliseconds(200)) {
        client.announce(ghost);
        last_announce = std::chrono::steady_clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });

  std::atomic<bool> stop{false};
  const auto began = std::chrono::steady_clock::now();
  auto report = runtime::Trainer(trainer_options(swarm, 3)).run(stop);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  stop_ghost = true;
  ghost_thread.join();
  ASSERT_TRUE(joined) << "the dead peer never got into step 0's group";
  const auto group = client.step_group(0, 0, 0);
  ASSERT_EQ(group.state, planner::GroupView::Ready);
  EXPECT_EQ(group.leader, ghost.peer_id);
  EXPECT_EQ(group.members.size(), 3u);

  EXPECT_TRUE(report.finished);
  EXPECT_EQ(report.steps, 3);
  // Bounded by the retries (a failed push, then a new group once the dead peer expired), far
  // below the averaging timeout per step that a deadlock-and-timeout would cost.
  EXPECT_LT(seconds, 3 * swarm.spec.timeouts.averaging_seconds) << seconds << " s";
  auto a = swarm.workers[0]->status();
  auto b = swarm.workers[1]->status();
  EXPECT_GE(a.step, 3);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.fingerprint, b.fingerprint) << "the stage's peers diverged";
  const auto events = client.stats()["events"];
  EXPECT_EQ(events.value("unaveraged_steps", 0), 0) << events.dump();
  std::cout << "3 steps in " << seconds << " s with the step-0 leader dead; events " << events.dump() << "\n";
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
  registry::RegistryClient client(swarm.registry->url(), std::chrono::milliseconds(2000), testing::kSecret);
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
  EXPECT_EQ(seen.state, planner::PeerState::Serving);
  EXPECT_GT(seen.samples_per_second, 0);
  EXPECT_GT(seen.loss, 0.5 * report.loss_last);   // a real training loss: same scale as the report's
  EXPECT_LT(seen.loss, 1.5 * report.loss_first);
  EXPECT_TRUE(client.peers("trainer").empty()) << "the trainer did not withdraw";
}


// A leaving peer that drained its in-flight requests under load can find its stage a few steps
// ahead: its gradient is still taken (added to the taker's open step), up to four steps old; an
// older one, or one from a step the taker has not reached, is refused as step_closed.
TEST(Averaging, AHandedOffGradientAFewStepsOldIsTakenAnOlderOneRefused) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 6), 1);
  std::atomic<bool> stop{false};
  runtime::Trainer trainer(trainer_options(swarm, 6));
  ASSERT_TRUE(trainer.run(stop).finished);
  auto& w = *swarm.workers[1];
  ASSERT_GE(w.status().step, 6);
  int64_t total = 0;  // the stage's parameter count
  for (auto& p : model::make_stage(runtime::model_config(swarm.spec), 1, 0)->parameters()) total += p.numel();
  net::Client client("127.0.0.1", w.port(), testing::kSecret);
  auto offer = [&](int64_t step) -> std::string {
    auto m = runtime::make_message(runtime::kGradientHandoff, {{"stage", 1}, {"step", step}, {"samples", 1}, {"peer", "gone"}});
    m.tensors.push_back(runtime::to_wire(torch::zeros({total})));
    try {
      client.call(std::move(m), std::chrono::seconds(10));
      return "accepted";
    } catch (const net::RemoteError& e) {
      return net::to_string(e.code());
    }
  };
  // Relative to the step the worker is at when offered (a taken gradient may complete its step).
  EXPECT_EQ(offer(w.status().step), "accepted");
  EXPECT_EQ(offer(w.status().step - 4), "accepted");
  EXPECT_EQ(offer(w.status().step - 5), "step_closed");
  EXPECT_EQ(offer(w.status().step + 1), "step_closed");
}

}  // namespace
}  // namespace swarm
