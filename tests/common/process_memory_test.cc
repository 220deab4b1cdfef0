// common/process_memory.h: /proc/<pid>/status fields read as bytes, and this process's own.
#include "common/process_memory.h"

#include <gtest/gtest.h>

#include <vector>

namespace swarm {
namespace {

TEST(ProcessMemory, StatusFieldsAreReadAsBytes) {
  const std::string status = "Name:\tswarm\nVmPeak:\t  900 kB\nVmHWM:\t   5120 kB\nVmRSS:\t    4096 kB\nThreads:\t3\n";
  EXPECT_EQ(status_kib_field_bytes(status, "VmHWM").value_or(-1), 5120 * 1024);
  EXPECT_EQ(status_kib_field_bytes(status, "VmRSS").value_or(-1), 4096 * 1024);
  EXPECT_FALSE(status_kib_field_bytes(status, "VmSwap").has_value());
  EXPECT_FALSE(status_kib_field_bytes(status, "Threads").has_value()) << "not a kB field";
  EXPECT_FALSE(status_kib_field_bytes("VmHWM:\t-3 kB\n", "VmHWM").has_value());
}

TEST(ProcessMemory, ThisProcesssPeakCoversWhatItTouched) {
  const int64_t before = resident_bytes().value_or(0);
  ASSERT_GT(before, 0);
  std::vector<char> touched(64 << 20, 1);  // 64 MiB written: resident while it lives
  const int64_t now = resident_bytes().value_or(0), peak = peak_resident_bytes().value_or(0);
  EXPECT_GE(now, before + (60 << 20)) << touched[12345];
  EXPECT_GE(peak, now);
}

}  // namespace
}  // namespace swarm
