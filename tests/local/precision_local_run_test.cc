// End-to-end: `swarm local` with spec.workers.precision bf16 on the CPU (separate processes on
// loopback) keeps lowering the loss and ends where the same job in float32 ends. About 10 s.
#include <gtest/gtest.h>

#include <iostream>

#include "tests/local/swarm_process.h"

namespace {

using namespace swarm::e2e;

struct JobRun {
  nlohmann::json summary;
  std::string dir;
};

JobRun run_job(const std::string& precision) {
  JobRun r;
  r.dir = (fs::temp_directory_path() / ("swarm-test-precision-" + precision + "-" + std::to_string(::getpid()))).string();
  fs::remove_all(r.dir);
  fs::create_directories(r.dir);
  const std::string job = r.dir + "/job.yaml";
  std::ofstream(job) << "apiVersion: swarm-operator.io/v1alpha1\nkind: SwarmJob\nmetadata: {name: e2e-" << precision
                     << "}\nspec:\n"
                        "  model: {hiddenSize: 64, numHeads: 4, layersPerStage: 1, sequenceLength: 64}\n"
                        "  pipeline: {stages: 2}\n"
                        "  training: {globalBatch: 32, microbatch: 8, maxSteps: 40, optimizer: {learningRate: 0.003},\n"
                        "             schedule: {kind: constant, warmupSteps: 0}}\n"
                        "  workers: {perStage: 1, threads: 1, device: cpu, precision: "
                     << precision << "}\n  trainers: {inflightMicrobatches: 4}\n";
  const std::string summary = r.dir + "/summary.json";
  const int rc = run({"local", job, "--summary", summary, "--log-dir", r.dir + "/logs", "--no-progress"},
                     r.dir + "/out.log", 120);
  EXPECT_EQ(rc, 0) << read_text(r.dir + "/out.log");
  std::ifstream f(summary);
  r.summary = f ? nlohmann::json::parse(f, nullptr, false) : nlohmann::json();
  return r;
}

// Mean loss of the i-th of n equal parts of the run's loss curve.
double part_mean(const nlohmann::json& curve, int i, int n) {
  const size_t lo = curve.size() * i / n, hi = curve.size() * (i + 1) / n;
  double sum = 0;
  for (size_t k = lo; k < hi; ++k) sum += curve[k][1].get<double>();
  return sum / static_cast<double>(hi - lo);
}

TEST(PrecisionLocalRun, Bf16KeepsLoweringTheLossAndAgreesWithFloat32) {
  const JobRun bf16 = run_job("bf16");
  const JobRun fp32 = run_job("fp32");
  ASSERT_TRUE(bf16.summary.is_object());
  ASSERT_TRUE(fp32.summary.is_object());
  const auto& s = bf16.summary;
  EXPECT_TRUE(s["finished"].get<bool>());
  EXPECT_GE(s["steps"].get<int64_t>(), 40);
  EXPECT_EQ(s["microbatches_lost"], 0);
  // The workers computed in bf16 (their start-up line names the precision).
  for (const char* w : {"stage0-w0", "stage1-w0"})
    EXPECT_NE(read_text(bf16.dir + "/logs/" + w + ".log").find("precision bf16 on cpu"), std::string::npos) << w;
  EXPECT_NE(read_text(fp32.dir + "/logs/stage0-w0.log").find("precision fp32 on cpu"), std::string::npos);
  // Keeps lowering: each quarter of the loss curve below the one before.
  const auto& curve = s["loss_curve"];
  ASSERT_GE(curve.size(), 8u) << s.dump();
  for (int q = 1; q < 4; ++q) EXPECT_LT(part_mean(curve, q, 4), part_mean(curve, q - 1, 4)) << "quarter " << q;
  EXPECT_LT(s["loss_last"].get<double>(), 0.7 * s["loss_first"].get<double>()) << s.dump();
  // Agrees with float32: same data, same initialization.
  const double e16 = s["eval_loss"].get<double>(), e32 = fp32.summary["eval_loss"].get<double>();
  std::cout << "eval_loss bf16 " << e16 << " fp32 " << e32 << ", samples/s bf16 "
            << s["samples_per_second"].get<double>() << " fp32 " << fp32.summary["samples_per_second"].get<double>()
            << "\n";
  EXPECT_NEAR(e16, e32, 0.03 * e32);
  EXPECT_NEAR(s["loss_last"].get<double>(), fp32.summary["loss_last"].get<double>(),
              0.05 * fp32.summary["loss_last"].get<double>());
  fs::remove_all(bf16.dir);
  fs::remove_all(fp32.dir);
}

}  // namespace
