// End-to-end: `swarm local --regions a,b`, each region holding every stage (trainers keep their
// microbatches at home) or one region without a stage's pool (its trainer routes that stage to the
// other region and still trains).
#include <gtest/gtest.h>

#include <string>

#include "tests/local/swarm_process.h"

namespace {

using namespace swarm::e2e;

// Two stages, two trainers; the penalty (10 s) is far above what a home peer's schedule leads by
// even on a loaded machine, so only exploration (an unmeasured remote peer is tried once) and
// failover may cross regions. At 1 s, a CI run under ctest -j 2 (2026-12-07) saw trainer0 send 57
// of its 248 hops abroad: with stage compute slowed several times by the load, one queued
// microbatch put a home peer's schedule more than 1 s ahead, and spilling over is then what the
// router is for (planner/stage_router.h); this test is about the preference, not the spill-over.
// The trainers start once every worker has announced itself (swarm local), and wait a while for a
// home worker still downloading its state (planner::may_start_routing): started before region a's
// workers had come up, trainer0 once sent its first 14 hops abroad.
// Rebalancing off: moving peers is not what these tests measure.
const char* kRegionsJob = R"(
  model: {hiddenSize: 64, numHeads: 4, layersPerStage: 1, sequenceLength: 64}
  pipeline: {stages: 2}
  training: {globalBatch: 32, microbatch: 4, maxSteps: 30}
  workers: {perStage: 2, threads: 1}
  trainers: {count: 2, inflightMicrobatches: 4, routing: {interRegionPenaltyMs: 10000}}
  timeouts: {heartbeatSeconds: 0.3, peerExpirySeconds: 1.5, forwardSeconds: 10, backwardSeconds: 10, averagingSeconds: 10}
  rebalancing: {enabled: false}
)";

// One `swarm local --regions a,b` run of kRegionsJob with `workers_per_stage`; its summary (the
// run's exit status and summary checked). The trainers' reports are in `dir`/logs.
nlohmann::json run_in_two_regions(const std::string& dir, const std::string& workers_per_stage) {
  const auto job = write_job(dir, kRegionsJob);
  const std::string summary = dir + "/summary.json";
  const int rc = run({"local", job, "--regions", "a,b", "--workers-per-stage", workers_per_stage, "--summary",
                      summary, "--log-dir", dir + "/logs", "--no-progress"},
                     dir + "/out.log", 300);
  EXPECT_EQ(rc, 0) << read_text(dir + "/out.log");
  auto s = read_json(summary);
  EXPECT_TRUE(s.is_object() && s.value("finished", false)) << s.dump();
  return s;
}

TEST(LocalRunRegions, TwoRegionsHoldingEveryStageKeepMicrobatchesAtHome) {
  const auto dir = fresh_dir("regions-home");
  const std::string logs = dir + "/logs";
  auto s = run_in_two_regions(dir, "2,2");
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["regions"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(s["microbatches_lost"].get<int64_t>(), 0);
  // Every microbatch counted: two hops (trainer -> stage 0, stage 0 -> stage 1) each.
  EXPECT_GE(s["microbatch_hops"].get<int64_t>(), 2 * 30 * 32 / 4) << s.dump();
  EXPECT_LE(s["cross_region_share"].get<double>(), 0.05) << s.dump();
  // Both trainers trained, each with its own region's peers: the registry listed the regions.
  for (const char* t : {"trainer0", "trainer1"}) {
    const auto r = read_json(logs + "/" + t + ".json");
    EXPECT_GT(r["samples"].get<int64_t>(), 0) << t;
    EXPECT_LE(r["cross_region_hops"].get<int64_t>(), r["microbatch_hops"].get<int64_t>() / 20) << t << r.dump();
  }
}

// --workers-per-stage 2,1: stage 1's only worker is in region a, so trainer1 (region b) has no home
// pool for it; it routes stage 1 to region a on every microbatch and trains.
TEST(LocalRunRegions, AStageWithoutAHomePoolTrainsThroughTheOtherRegion) {
  const auto dir = fresh_dir("regions-empty");
  const std::string logs = dir + "/logs";
  auto s = run_in_two_regions(dir, "2,1");
  ASSERT_TRUE(s.is_object());
  EXPECT_GE(s["steps"].get<int64_t>(), 30);
  EXPECT_EQ(s["microbatches_lost"].get<int64_t>(), 0);
  const auto b = read_json(logs + "/trainer1.json");
  ASSERT_TRUE(b.is_object());
  ASSERT_GT(b["microbatches"].get<int64_t>(), 0) << b.dump();
  // Each of its microbatches crossed at least once: stage 0 (at home in b) -> stage 1 (in a).
  EXPECT_GE(b["cross_region_hops"].get<int64_t>(), b["microbatches"].get<int64_t>()) << b.dump();
  // Region a's trainer has both stages at home. Region-blind it would send half of its stage-0
  // hops (a quarter of all) to region b's stage-0 peer; with the penalty it crosses only when its
  // home peer's queue outweighs it (at a 1 s penalty: 2-3 % on a quiet machine, 16 of 240 hops,
  // 6.7 %, once under ctest -j 2, 2026-12-07). At most an eighth of its hops, half the
  // region-blind share.
  const auto a = read_json(logs + "/trainer0.json");
  EXPECT_LE(a["cross_region_hops"].get<int64_t>(), a["microbatch_hops"].get<int64_t>() / 8) << a.dump();
}

}  // namespace
