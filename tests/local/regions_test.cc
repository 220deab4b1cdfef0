// `swarm local --regions`: the list parsed or refused naming the option, each process's region, and
// the merged report's cross-region share.
#include "worker/local/regions.h"
#include "worker/local/report.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace swarm::runtime {
namespace {

TEST(LocalRegions, ParsesANameListAndRefusesBadOnesNamingTheOption) {
  EXPECT_EQ(parse_regions("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(parse_regions("eu-west-1,us_east.2"), (std::vector<std::string>{"eu-west-1", "us_east.2"}));
  for (const std::string bad : {"", ",", "a,", ",b", "a,,b", "a b", "a,a", "a/b"}) {
    try {
      parse_regions(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--regions: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("got \"" + bad + "\""), std::string::npos) << e.what();
    }
  }
}

TEST(LocalRegions, ProcessesGoRoundRobinSoAStageWithFewerWorkersLeavesTheLastRegionsWithout) {
  const std::vector<std::string> ab = {"a", "b"};
  EXPECT_EQ(region_of(ab, 0), "a");
  EXPECT_EQ(region_of(ab, 1), "b");
  EXPECT_EQ(region_of(ab, 2), "a");
  EXPECT_EQ(region_of({}, 3), "");
  // --workers-per-stage 2,1: stage 1's only worker (index 0) is in a; region b has none of stage 1.
  EXPECT_EQ(region_of(ab, 0), "a");
}

TEST(LocalRegions, AJoinerComesUpInThePreemptedWorkersRegion) {
  JoinerRegions j({"a", "b"});
  EXPECT_EQ(j.next(), "a");  // nothing preempted: round robin by joiner index
  j.preempted("b");
  j.preempted("b");
  j.preempted("a");
  EXPECT_EQ(j.next(), "b");
  EXPECT_EQ(j.next(), "b");
  EXPECT_EQ(j.next(), "a");
  EXPECT_EQ(j.next(), "a");  // joiner index 4
  EXPECT_EQ(j.next(), "b");
  JoinerRegions none({});
  none.preempted("");
  EXPECT_EQ(none.next(), "");
  EXPECT_EQ(none.next(), "");
}

TEST(LocalRegions, TheMergedReportSumsHopsIntoACrossRegionShare) {
  const nlohmann::json a = {{"samples", 10}, {"microbatch_hops", 300}, {"cross_region_hops", 3}};
  const nlohmann::json b = {{"samples", 10}, {"microbatch_hops", 100}, {"cross_region_hops", 17}};
  const auto m = merge_reports({a, b});
  EXPECT_EQ(m["microbatch_hops"], 400);
  EXPECT_EQ(m["cross_region_hops"], 20);
  EXPECT_DOUBLE_EQ(m["cross_region_share"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(merge_reports({nlohmann::json{{"samples", 1}}})["cross_region_share"].get<double>(), 0.0);
}

}  // namespace
}  // namespace swarm::runtime
