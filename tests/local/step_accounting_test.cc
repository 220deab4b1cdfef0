// Issue 29: one global batch is one step for every stage. `build/bin/swarm local` runs of the
// fault matrix's job (2 stages x 2 workers, global batch 32, microbatch 4), without faults and
// with peers SIGKILLed and respawned on a seeded schedule. Each stage admits work only under a
// claim the registry grants (planner/step_book.h, Claims), so each step averages exactly the
// global batch (less the samples a fault lost, each counted), and every stage ends at the
// trainers' count of global batches: the summary's step invariant (worker/local/step_invariant.h).
// The runs are bounded by steps, never by time; they assert counts, never durations.
#include <gtest/gtest.h>

#include <string>

#include "tests/local/fault_matrix_helpers.h"
#include "tests/local/swarm_process.h"

namespace {

using namespace swarm::e2e;

// A count of the summary: the registry's, or the workers' own if they counted more (a worker's
// last counts may reach the registry after the summary read it).
int64_t counted(const nlohmann::json& s, const char* kind) {
  int64_t own = 0;
  if (s.contains("worker_events") && s["worker_events"].is_object()) own = s["worker_events"].value(kind, int64_t{0});
  return std::max(num(s, kind), own);
}

void expect_stages_at_the_trainers_global_batches(const nlohmann::json& s) {
  ASSERT_TRUE(s.contains("step_invariant") && s["step_invariant"].is_object()) << s.dump();
  const auto& inv = s["step_invariant"];
  EXPECT_TRUE(inv["ok"].get<bool>()) << inv.dump();
  ASSERT_EQ(inv["stages"].size(), 2u) << inv.dump();
  // The last steps the trainers' microbatches filled were closed before the summary was read.
  for (const auto& [stage, st] : inv["stages"].items())
    EXPECT_LT(st["open_samples"].get<int64_t>(), 32) << "stage " << stage << ": " << inv.dump();
}

TEST(StepAccounting, WithoutFaultsEveryStepHoldsTheGlobalBatchAndTheStagesStayTogether) {
  const auto dir = fresh_dir("steps-clean");
  const auto job = write_job(dir, job_body(2, 60));
  const std::string summary = dir + "/summary.json";
  const int rc = run({"local", job, "--workers-per-stage", "2,2", "--summary", summary, "--log-dir", dir + "/logs",
                      "--no-progress"},
                     dir + "/out.log", 900);
  ASSERT_EQ(rc, 0) << read_text(dir + "/out.log");
  auto s = read_json(summary);
  ASSERT_TRUE(s.is_object());
  EXPECT_TRUE(s["finished"].get<bool>());
  EXPECT_GE(num(s, "steps"), 60);
  // Two peers a stage, and not one step of either stage averaged more or fewer than 32 samples
  // (with peers learning each other's counts every 25 ms: 36-52).
  EXPECT_EQ(counted(s, "steps_over"), 0) << s.dump();
  EXPECT_EQ(counted(s, "steps_short"), 0) << s.dump();
  EXPECT_EQ(num(s, "stage_step_spread"), 0) << s.dump();
  EXPECT_EQ(num(s, "unaveraged_steps"), 0);
  expect_stages_at_the_trainers_global_batches(s);
  for (const auto& [stage, st] : s["step_invariant"]["stages"].items()) {
    EXPECT_EQ(st["extra_samples"], 0) << "stage " << stage << ": " << s["step_invariant"].dump();
    EXPECT_EQ(st["step"], s["step_invariant"]["completed_global_batches"]) << s["step_invariant"].dump();
  }
}

// Peers SIGKILLed every 3 s, each replaced 1 s later (the previous session's run: stage 0 ended
// at step 159, stage 1 at 150, its steps averaging 36-52 samples with two peers). Their owed
// work is retried on the live peers under the claims they held, so the stages stay together.
TEST(StepAccounting, PreemptedPeersLeaveEveryStageAtTheTrainersGlobalBatches) {
  const auto dir = fresh_dir("steps-preempted");
  const auto job = write_job(dir, job_body(2, 150));
  const std::string summary = dir + "/summary.json";
  const int rc = run({"local", job, "--workers-per-stage", "2,2", "--summary", summary, "--log-dir", dir + "/logs",
                      "--no-progress", "--preempt-every", "3", "--respawn-after", "1", "--seed", "11"},
                     dir + "/out.log", 1500);
  ASSERT_EQ(rc, 0) << read_text(dir + "/out.log");
  auto s = read_json(summary);
  ASSERT_TRUE(s.is_object());
  EXPECT_TRUE(s["finished"].get<bool>());
  EXPECT_GE(num(s, "preemptions"), 3) << s.dump();
  EXPECT_EQ(num(s, "peers_lost"), num(s, "preemptions")) << s.dump();
  EXPECT_EQ(num(s, "unaveraged_steps"), 0);
  // No step averaged more than the global batch; one that averaged fewer lost them to a killed
  // peer, or closed before the retries of work it owed came (samples_unretried), each sample
  // counted.
  EXPECT_EQ(counted(s, "steps_over"), 0) << s.dump();
  const int64_t accounted = num(s, "samples_lost") + num(s, "samples_readmitted") + num(s, "samples_unretried") +
                            4 * num(s, "microbatches_lost") + num(s, "handoff_samples_unconfirmed");
  EXPECT_LE(counted(s, "step_samples_short"), accounted) << s.dump();
  EXPECT_EQ(num(s, "stage_step_spread"), 0) << s.dump();
  expect_stages_at_the_trainers_global_batches(s);
}

}  // namespace
