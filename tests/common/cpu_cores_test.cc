// common/cpu_cores: the cores a process is given, from its affinity and its cgroup's CPU quota.
#include "common/cpu_cores.h"

#include <gtest/gtest.h>

#include <thread>

namespace swarm {
namespace {

TEST(CpuCores, CgroupV2Quota) {
  EXPECT_EQ(quota_cores_v2("max 100000\n"), std::nullopt);
  EXPECT_EQ(quota_cores_v2("200000 100000\n"), 2);
  EXPECT_EQ(quota_cores_v2("150000 100000"), 2);  // 1.5 cores: two threads, one partly idle
  EXPECT_EQ(quota_cores_v2("50000 100000"), 1);
  EXPECT_EQ(quota_cores_v2("100000 100000"), 1);
  EXPECT_EQ(quota_cores_v2(""), std::nullopt);      // no file (not in a cgroup v2 hierarchy)
  EXPECT_EQ(quota_cores_v2("garbage"), std::nullopt);
  EXPECT_EQ(quota_cores_v2("0 100000"), std::nullopt);
}

TEST(CpuCores, CgroupV1Quota) {
  EXPECT_EQ(quota_cores_v1("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(quota_cores_v1("400000\n", "100000\n"), 4);
  EXPECT_EQ(quota_cores_v1("", ""), std::nullopt);
}

TEST(CpuCores, TheSmallerOfAffinityAndQuota) {
  EXPECT_EQ(cores_given(64, 2), 2);       // a pod limited to 2 CPUs on a 64-core node
  EXPECT_EQ(cores_given(2, 8), 2);        // a cpuset of 2 under a looser quota
  EXPECT_EQ(cores_given(3, std::nullopt), 3);
  EXPECT_EQ(cores_given(0, std::nullopt), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_GE(usable_cores(), 1);
  EXPECT_LE(usable_cores(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace swarm
