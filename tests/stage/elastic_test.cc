// Joining a stage (state download from a live donor), checkpoints (atomic write, restore when a
// stage has no live peer, a crash mid-write never hurting the last good one).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/crypto.h"
#include "registry/registry_client.h"
#include "tests/stage/swarm_fixture.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/state.h"
#include "worker/net/client.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/runtime/job_model.h"
#include "worker/runtime/protocol.h"
#include "worker/trainer/trainer.h"

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
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(2), testing::kSecret);
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

const std::string kKey = runtime::checkpoint_key(testing::kSecret);

TEST(Checkpoint, WriteListReadRoundTripAndPruning) {
  const auto dir = fresh_dir("ckpt-unit");
  for (int step : {10, 20, 30}) runtime::write_checkpoint(dir, 1, step, "state-" + std::to_string(step), 2, kKey);
  auto all = runtime::list_checkpoints(dir, 1);
  ASSERT_EQ(all.size(), 2u);  // keep = 2
  EXPECT_EQ(all[0].step, 30);
  EXPECT_EQ(all[1].step, 20);
  EXPECT_EQ(runtime::open_checkpoint(all[0], 1, kKey), "state-30");
  EXPECT_TRUE(runtime::list_checkpoints(dir, 0).empty());
  fs::remove_all(dir);
}

// A checkpoint changed on the volume, written with another job's secret, or moved to another stage
// or step is refused with an error naming the file and why; the untouched one opens.
TEST(Checkpoint, ATamperedOrMovedCheckpointIsRefused) {
  const auto dir = fresh_dir("ckpt-auth");
  const std::string state(4096, 's');
  runtime::write_checkpoint(dir, 0, 40, state, 5, kKey);
  auto good = runtime::list_checkpoints(dir, 0).at(0);
  ASSERT_EQ(runtime::open_checkpoint(good, 0, kKey), state);
  const std::string bytes = runtime::read_checkpoint(good.path);
  auto expect_refused = [&](const runtime::CheckpointFile& f, int stage, const std::string& key, const std::string& why) {
    try {
      runtime::open_checkpoint(f, stage, key);
      ADD_FAILURE() << "opened " << f.path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("checkpoint " + f.path + ": " + why), std::string::npos) << e.what();
    }
  };
  // Every byte flipped in turn (state and trailer alike), a sample of them to keep it fast.
  for (size_t i = 0; i < bytes.size(); i += 97) {
    std::string bad = bytes;
    bad[i] ^= 0x04;
    std::ofstream(good.path, std::ios::binary | std::ios::trunc) << bad;
    // The 64-byte trailer: magic (8), stage (8), step (8), key id (8), MAC (32).
    const bool in_magic = i >= bytes.size() - 64 && i < bytes.size() - 56;
    const bool in_key_id = i >= bytes.size() - 40 && i < bytes.size() - 32;
    expect_refused(good, 0, kKey,
                   in_magic    ? "no authentication trailer"
                   : in_key_id ? "written by another job instance"
                               : "authentication failed");
  }
  std::ofstream(good.path, std::ios::binary | std::ios::trunc) << bytes;
  expect_refused(good, 0, runtime::checkpoint_key("another-jobs-secret"), "written by another job instance");
  EXPECT_THROW(runtime::open_checkpoint(good, 0, runtime::checkpoint_key("another-jobs-secret")),
               runtime::ForeignCheckpoint);
  expect_refused(good, 1, kKey, "holds stage 0 step 40, not stage 1 step 40");
  runtime::CheckpointFile renamed{good.path, 90};
  expect_refused(renamed, 0, kKey, "holds stage 0 step 40, not stage 0 step 90");
  std::ofstream(good.path, std::ios::binary | std::ios::trunc) << state;  // an old, unauthenticated file
  expect_refused(good, 0, kKey, "no authentication trailer");
  fs::remove_all(dir);
}

// Issue 29: a job deleted and re-created with a new secret found the old instance's files (steps
// 850, 900) in its folder; retention, newest step first, then deleted the new job's own step 50.
// Files carry the key id of the secret that wrote them: another instance's are listed with it,
// never counted by retention nor removed, and refused by name (ForeignCheckpoint).
TEST(Checkpoint, AnotherJobInstancesFilesAreNeitherCountedNorRemoved) {
  const auto dir = fresh_dir("ckpt-foreign");
  const std::string old_key = runtime::checkpoint_key("the-deleted-jobs-secret");
  for (int step : {850, 900}) runtime::write_checkpoint(dir, 0, step, "old-" + std::to_string(step), 2, old_key);
  for (int step : {50, 100, 150}) runtime::write_checkpoint(dir, 0, step, "new-" + std::to_string(step), 2, kKey);
  const auto all = runtime::list_checkpoints(dir, 0);
  std::vector<int64_t> steps;
  for (const auto& f : all) steps.push_back(f.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{900, 850, 150, 100})) << "the new job's 50 pruned (keep 2), nothing else";
  const std::vector<std::string> mine{runtime::checkpoint_key_id(kKey)};
  for (const auto& f : all) {
    EXPECT_EQ(f.key_id.size(), 16u) << f.path;
    EXPECT_EQ(runtime::written_by_another(f, mine), f.step >= 850) << f.path;
  }
  EXPECT_EQ(runtime::open_checkpoint(all[2], 0, kKey), "new-150");
  EXPECT_THROW(runtime::open_checkpoint(all[0], 0, kKey), runtime::ForeignCheckpoint);
  EXPECT_EQ(runtime::open_checkpoint(all[0], 0, old_key), "old-900");
  // The secret's previous key (a rotation) counts as the job's own: its files are pruned too.
  runtime::write_checkpoint(dir, 0, 200, "rotated", 2, runtime::checkpoint_key("rotated-secret"),
                            {runtime::checkpoint_key_id(kKey)});
  steps.clear();
  for (const auto& f : runtime::list_checkpoints(dir, 0)) steps.push_back(f.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{900, 850, 200, 150}));
  fs::remove_all(dir);
}

// A checkpoint of the first format (a 56-byte trailer, no key id) still opens; having no key id it
// is never taken for another instance's, and retention leaves it alone.
TEST(Checkpoint, AFormatOneCheckpointStillOpensAndIsNeverPruned) {
  const auto dir = fresh_dir("ckpt-v1");
  fs::create_directories(dir + "/stage-0");
  const std::string state = "format-one-state";
  std::string head("SWCKPT01", 8);
  for (int64_t v : {int64_t{0}, int64_t{7}})
    for (int i = 0; i < 8; ++i) head.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
  crypto::Hmac h(kKey);
  h.update(state.data(), state.size());
  h.update(head.data(), head.size());
  const crypto::Mac mac = h.finish();
  std::ofstream(dir + "/stage-0/step-000000007.ckpt", std::ios::binary)
      << state << head << std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
  auto all = runtime::list_checkpoints(dir, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].key_id.empty());
  EXPECT_FALSE(runtime::written_by_another(all[0], {runtime::checkpoint_key_id(kKey)}));
  EXPECT_EQ(runtime::open_checkpoint(all[0], 0, kKey), state);
  for (int step : {8, 9, 10}) runtime::write_checkpoint(dir, 0, step, "v2", 1, kKey);
  all = runtime::list_checkpoints(dir, 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 10);
  EXPECT_EQ(all[1].step, 7);
  fs::remove_all(dir);
}

TEST(Checkpoint, ACrashMidWriteNeverHidesTheLastGoodCheckpoint) {
  const auto dir = fresh_dir("ckpt-crash");
  runtime::write_checkpoint(dir, 0, 20, "good", 5, kKey);
  // A writer killed mid-write leaves only its temporary file behind.
  std::ofstream(dir + "/stage-0/step-000000030.ckpt.tmp.4242") << "half a checkp";
  auto all = runtime::list_checkpoints(dir, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].step, 20);
  EXPECT_EQ(runtime::open_checkpoint(all[0], 0, kKey), "good");
  EXPECT_THROW(runtime::write_checkpoint("/proc/no-such-dir", 0, 1, "x", 1, kKey), std::runtime_error);
  fs::remove_all(dir);
}

TEST(Checkpoint, AFileNamedForANegativeStepIsNotACheckpoint) {
  const auto dir = fresh_dir("ckpt-negative");
  runtime::write_checkpoint(dir, 0, 2, "good", 5, kKey);
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
  // The newest file is corrupt (torn by a crashed disk, or planted): the restore refuses it and
  // falls back to the next one.
  std::ofstream(dir + "/stage-0/step-000000999.ckpt") << "garbage";

  // What the checkpoint holds: load it into a fresh model to compare fingerprints.
  auto cfg = runtime::model_config(spec);
  auto reference = model::make_stage(cfg, 0, 12345);
  model::StageOptimizer opt(*reference, runtime::optimizer_config(spec));
  model::load_state(runtime::open_checkpoint(ckpts[0], 0, kKey), *reference, opt);

  swarm.workers[0]->stop();  // stage 0 has no live peer now
  auto& restored = swarm.add_worker(0, 5);
  EXPECT_EQ(restored.status().step, newest);
  EXPECT_EQ(restored.status().fingerprint, model::param_fingerprint(*reference));
  registry::RegistryClient reg(swarm.registry->url(), std::chrono::seconds(2), testing::kSecret);
  EXPECT_EQ(reg.stats()["events"].value("checkpoint_restores", 0), 1);
  EXPECT_EQ(reg.stats()["events"].value("checkpoints_refused", 0), 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace swarm
