// `swarm step-check` (cmd/check_commands.h): the step invariant of a live job from files, as the
// cluster e2e saves them (the registry's GET /v1/stats, each trainer's GET /metrics before and
// after). Exit 0 when it holds, 3 when it does not, and a clear error naming the file or the
// metric for input that is not what it should be.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/local/swarm_process.h"

namespace {

using namespace swarm::e2e;

class StepCheckCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("step-check");
    // global batch 32, microbatch 4, 2 lanes: one trainer may have 8 samples in flight
    job_ = write_job(dir_, "  pipeline: {stages: 2}\n  training: {globalBatch: 32, microbatch: 4}\n"
                           "  trainers: {inflightMicrobatches: 2}\n");
  }
  std::string file(const std::string& name, const std::string& text) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  static std::string metrics(int64_t completed, int64_t lost) {
    return "# TYPE swarm_trainer_samples_completed_total counter\n"
           "swarm_trainer_samples_completed_total{peer=\"t0\",role=\"trainer\"} " + std::to_string(completed) +
           "\nswarm_trainer_microbatches_lost_total{peer=\"t0\",role=\"trainer\"} " + std::to_string(lost) + "\n";
  }
  // stages at 60 steps, the open step holding `open0` / `open1` claims
  std::string stats(int open0, int open1) {
    return file("stats.json", "{\"stageSteps\": {\"0\": 60, \"1\": 60}, \"stageOpenSamples\": {\"0\": " +
                                  std::to_string(open0) + ", \"1\": " + std::to_string(open1) + "}, \"events\": {}}");
  }
  int check(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"step-check", "--job", job_};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args, dir_ + "/out.log", 60);
  }
  std::string out() const { return read_text(dir_ + "/out.log"); }
  std::string dir_, job_;
};

TEST_F(StepCheckCli, HoldsWithTheTrainersMicrobatchesInFlightAndNoMore) {
  // 1932 samples completed: 60 steps of 32 and 12 of the open one; stage 1 admitted 8 more
  // (the trainer's two lanes in flight).
  const std::string before = file("m-before", metrics(1932, 0));
  EXPECT_EQ(check({"--stats", stats(12, 20), "--trainer-metrics", before}), 0) << out();
  EXPECT_NE(out().find("\"in_flight_samples\": 8"), std::string::npos) << out();
  // 12 more on stage 1 than two lanes can hold: broken, exit 3, the stage's extra printed.
  EXPECT_EQ(check({"--stats", stats(12, 32), "--trainer-metrics", before}), 3) << out();
  EXPECT_NE(out().find("\"extra_samples\": 20"), std::string::npos) << out();
  // A stage under the count (8 short): broken, unless --allow-short (the upper bound alone).
  EXPECT_EQ(check({"--stats", stats(12, 4), "--trainer-metrics", before}), 3) << out();
  EXPECT_EQ(check({"--stats", stats(12, 4), "--trainer-metrics", before, "--allow-short"}), 0) << out();
  EXPECT_NE(out().find("\"short_samples\": 8"), std::string::npos) << out();
  EXPECT_EQ(check({"--stats", stats(12, 32), "--trainer-metrics", before, "--allow-short"}), 3) << out();
  // ... unless the trainer completed them between the reads (read again after the stats).
  EXPECT_EQ(check({"--stats", stats(12, 32), "--trainer-metrics", before, "--trainer-metrics-after",
                   file("m-after", metrics(1944, 0))}),
            0)
      << out();
}

TEST_F(StepCheckCli, InputThatIsNotWhatItShouldBeIsRefusedByName) {
  const std::string good = file("m", metrics(1932, 0));
  EXPECT_EQ(check({"--stats", file("bad.json", "{not json"), "--trainer-metrics", good}), 1);
  EXPECT_NE(out().find("--stats"), std::string::npos) << out();
  EXPECT_NE(out().find("not JSON"), std::string::npos) << out();
  EXPECT_EQ(check({"--stats", file("peers.json", "{\"peers\": []}"), "--trainer-metrics", good}), 1);
  EXPECT_NE(out().find("no stageSteps"), std::string::npos) << out();
  EXPECT_EQ(check({"--stats", stats(12, 12), "--trainer-metrics", file("w", "swarm_samples_processed_total 5\n")}), 1);
  EXPECT_NE(out().find("no swarm_trainer_samples_completed_total"), std::string::npos) << out();
  // after-reads that went backwards: a trainer restarted between them
  EXPECT_EQ(check({"--stats", stats(12, 12), "--trainer-metrics", good, "--trainer-metrics-after",
                   file("m-less", metrics(100, 0))}),
            1);
  EXPECT_NE(out().find("a trainer restarted between the reads"), std::string::npos) << out();
  EXPECT_EQ(check({"--stats", stats(12, 12), "--trainer-metrics", good, "--trainer-metrics-after", good,
                   "--trainer-metrics-after", good}),
            1);
  EXPECT_NE(out().find("one per trainer"), std::string::npos) << out();
}

}  // namespace
