// Joining a stage (state download from a live donor), checkpoints (atomic write, restore when a
// stage has no live peer, a crash mid-write never hurting the last good one).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "registry/registry_client.h"
#include "tests/swarm/swarm_fixture.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/state.h"
#include "worker/net/client.h"
#include "worker/swarm/checkpoint.h"
#include "worker/swarm/job_model.h"
#include "worker/swarm/protocol.h"
#include "worker/swarm/trainer.h"

namespace fs = std::filesystem;

namespace swarm {
namespace {


// The complete state (parameters, optimizer moments, step) a worker would hand a joiner.
std::string state_of(runtime::StageServer& w, int stage) {
  net::Client c("127.0.0.1", static_cast<uint16_t>(w.port()), testing::kSecret);
  auto reply = c.call(runtime::make_message(net::StateRequest, {{"stage", stage}}), std::chrono::seconds(10));
  EXPECT_EQ(reply.type, net::StateReply);
  const auto& t = reply.tensors.at(0);
  return std::string(reinterpret_cast<const char*>(t.data), t.nbytes);
}

std::string fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("swarm-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

TEST(Join, AJoinersParametersAndOptimizerStateEqualTheDonorsExactly) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 3), 1);
  ASSERT_TRUE(testing::train(swarm, 3).finished);
  auto& donor = *swarm.workers[0];
  auto& joiner = swarm.add_worker(0, 1);
  const auto d = donor.status(), j = joiner.status();
  EXPECT_TRUE(j.ready);
  EXPECT_EQ(j.stage, 0);
  EXPECT_GE(j.step, 3);
  EXPECT_EQ(j.step, d.step);
  EXPECT_EQ(j.fingerprint, d.fingerprint);
  // Bit for bit, moments and step included.
  EXPECT_EQ(state_of(joiner, 0), state_of(donor, 0));
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(2));
  EXPECT_EQ(reg.stats()["events"].value("state_downloads", 0), 1);
}

TEST(Join, AWorkerWithoutAStageJoinsTheOneThatNeedsIt) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(3, 2), 1);
  swarm.workers[0]->stop();  // stage 0 loses its only peer
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto& joiner = swarm.add_worker(-1, 9);
  EXPECT_EQ(joiner.status().stage, 0);
}

TEST(Checkpoint, WriteListReadRoundTripAndPruning) {
  const auto dir = fresh_dir("ckpt-unit");
  for (int step : {10, 20, 30}) runtime::write_checkpoint(dir, 1, step, "state-" + std::to_string(step), 2);
  auto all = runtime::list_checkpoints(dir, 1);
  ASSERT_EQ(all.size(), 2u);  // keep = 2
  EXPECT_EQ(all[0].step, 30);
  EXPECT_EQ(all[1].step, 20);
  EXPECT_EQ(runtime::read_checkpoint(all[0].path), "state-30");
  EXPECT_TRUE(runtime::list_checkpoints(dir, 0).empty());
  fs::remove_all(dir);
}

TEST(Checkpoint, ACrashMidWriteNeverHidesTheLastGoodCheckpoint) {
  const auto dir = fresh_dir("ckpt-crash");
  runtime::write_checkpoint(dir, 0, 20, "good", 5);
  // A writer killed mid-write leaves only its temporary file behind.
  std::ofstream(dir + "/stage-0/step-000000030.ckpt.tmp.4242") << "half a checkp";
  auto all = runtime::list_checkpoints(dir, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].step, 20);
  EXPECT_EQ(runtime::read_checkpoint(all[0].path), "good");
  EXPECT_THROW(runtime::write_checkpoint("/proc/no-such-dir", 0, 1, "x", 1), std::runtime_error);
  fs::remove_all(dir);
}

TEST(Checkpoint, AFileNamedForANegativeStepIsNotACheckpoint) {
  const auto dir = fresh_dir("ckpt-negative");
  runtime::write_checkpoint(dir, 0, 2, "good", 5);
  std::ofstream(dir + "/stage-0/step--00000003.ckpt") << "planted";  // step_name(-3), found by fuzzing
  auto all = runtime::list_checkpoints(dir, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].step, 2);
  fs::remove_all(dir);
}

TEST(Checkpoint, AStageWithNoLivePeerIsRestoredFromItsNewestUsableCheckpoint) {
  torch::set_num_threads(1);
  const auto dir = fresh_dir("ckpt-restore");
  auto spec = testing::tiny_job(2, 4);
  spec.checkpoint.path = dir;
  spec.checkpoint.every_steps = 2;
  testing::LocalSwarm swarm(spec, 1);
  ASSERT_TRUE(testing::train(swarm, 4).finished);
  auto ckpts = runtime::list_checkpoints(dir, 0);
  ASSERT_FALSE(ckpts.empty());
  EXPECT_EQ(ckpts[0].step % 2, 0);
  const int64_t newest = ckpts[0].step;
  // The newest file is corrupt (torn by a crashed disk): the restore falls back to the next one.
  std::ofstream(dir + "/stage-0/step-000000999.ckpt") << "garbage";

  // What the checkpoint holds: load it into a fresh model to compare fingerprints.
  auto cfg = runtime::model_config(spec);
  auto reference = model::make_stage(cfg, 0, 12345);
  model::StageOptimizer opt(*reference, runtime::optimizer_config(spec));
  model::load_state(runtime::read_checkpoint(ckpts[0].path), *reference, opt);

  swarm.workers[0]->stop();  // stage 0 has no live peer now
  auto& restored = swarm.add_worker(0, 5);
  EXPECT_EQ(restored.status().step, newest);
  EXPECT_EQ(restored.status().fingerprint, model::param_fingerprint(*reference));
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(2));
  EXPECT_EQ(reg.stats()["events"].value("checkpoint_restores", 0), 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace swarm
