// Learning parity: `swarm local` (separate processes, the wire, a registry) and
// `swarm local --baseline single-process` (one process, no network) train the default job's model
// on the same data to the same eval loss. Same libtorch, same kernels, one torch thread each side.
// So does `swarm local` with spec.pipeline.recomputeActivations.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/local/swarm_process.h"

namespace {

using namespace swarm::e2e;

nlohmann::json train(const std::string& dir, const std::string& job, const std::vector<std::string>& extra) {
  std::filesystem::create_directories(dir);
  const std::string summary = dir + "/summary.json";
  std::vector<std::string> args = {"local", job, "--steps", "12", "--threads", "1", "--summary", summary,
                                   "--log-dir", dir + "/logs", "--no-progress", "--no-checkpoints"};
  args.insert(args.end(), extra.begin(), extra.end());
  const int rc = run(args, dir + "/out.log", 300);
  EXPECT_EQ(rc, 0) << read_text(dir + "/out.log");
  return read_json(summary);
}

// One trainer with one microbatch in flight: every stage sums a step's microbatch gradients in
// the same order as the single process does, so the two runs agree to float32 rounding of the
// same operations. (With several microbatches in flight the order of backwards varies from run to
// run, and float addition is not associative: there the bound is the run-to-run spread.)
TEST(Parity, TheSwarmAndTheSingleProcessReachTheSameEvalLoss) {
  const auto dir = fresh_dir("parity");
  std::string yaml = read_text(std::string(SWARM_SOURCE_DIR) + "/examples/tiny-lm.yaml");
  const std::string inflight = "inflightMicrobatches: 4";
  const auto at = yaml.find(inflight);
  ASSERT_NE(at, std::string::npos) << "examples/tiny-lm.yaml changed: the test sets inflightMicrobatches";
  yaml.replace(at, inflight.size(), "inflightMicrobatches: 1");
  const std::string job = dir + "/job.yaml";
  std::ofstream(job) << yaml;
  const auto swarm = train(dir + "/swarm", job, {});
  const auto single = train(dir + "/single", job, {"--baseline", "single-process"});
  ASSERT_TRUE(swarm.is_object() && single.is_object());
  EXPECT_EQ(swarm["steps"], 12);
  EXPECT_EQ(single["steps"], 12);
  const double a = swarm["eval_loss"].get<double>(), b = single["eval_loss"].get<double>();
  EXPECT_GT(a, 0);
  EXPECT_NEAR(a, b, 1e-5) << "swarm " << swarm.dump() << "\nsingle process " << single.dump();
  // Microbatch by microbatch, the training loss of the 12 steps' 96 microbatches (measured: equal
  // to the last digit). The swarm's trainer may have sent a 97th before it learned the run was
  // over: it is in no step (its samples are counted, so "samples" and "loss_last" may differ).
  const auto& ca = swarm["loss_curve"];
  const auto& cb = single["loss_curve"];
  const size_t per_run = 12 * 64 / 8;
  ASSERT_GE(ca.size(), per_run) << swarm.dump();
  ASSERT_GE(cb.size(), per_run) << single.dump();
  for (size_t i = 0; i < per_run; ++i) {
    EXPECT_EQ(ca[i][0], cb[i][0]) << "entry " << i;
    EXPECT_NEAR(ca[i][1].get<double>(), cb[i][1].get<double>(), 1e-5) << "microbatch " << i;
  }
  EXPECT_LE(swarm["samples"].get<int64_t>() - single["samples"].get<int64_t>(), 4 * 8) << "at most the in-flight ones";

  // The same job with spec.pipeline.recomputeActivations: stage 0 keeps only each microbatch's
  // tokens and runs its forward again before the backward. The same operations on the same
  // parameters: the same losses, microbatch by microbatch, and the same eval loss.
  const std::string keep = "recomputeActivations: false";
  const auto flag = yaml.find(keep);
  ASSERT_NE(flag, std::string::npos) << "examples/tiny-lm.yaml documents pipeline.recomputeActivations";
  yaml.replace(flag, keep.size(), "recomputeActivations: true");
  const std::string job_recompute = dir + "/job-recompute.yaml";
  std::ofstream(job_recompute) << yaml;
  const auto recomputed = train(dir + "/recompute", job_recompute, {});
  ASSERT_TRUE(recomputed.is_object());
  EXPECT_EQ(recomputed["steps"], 12);
  EXPECT_NEAR(recomputed["eval_loss"].get<double>(), a, 1e-5) << recomputed.dump();
  const auto& cr = recomputed["loss_curve"];
  ASSERT_GE(cr.size(), per_run) << recomputed.dump();
  for (size_t i = 0; i < per_run; ++i)
    EXPECT_NEAR(cr[i][1].get<double>(), ca[i][1].get<double>(), 1e-5) << "microbatch " << i << " (recompute)";
}

}  // namespace
