// CapacityMeter (worker/stage/capacity_meter.h): samples completed per second of compute over a
// sliding window of wall time, on a fake clock.
#include <gtest/gtest.h>

#include "worker/stage/capacity_meter.h"
#include "tests/stage/fake_clock.h"

namespace swarm::runtime {
namespace {

constexpr double kStart = 1000;  // the fake clock's first reading

TEST(CapacityMeter, IsZeroWithNoSamples) {
  FakeClock c(kStart);
  CapacityMeter m(c.clock());
  EXPECT_EQ(m.samples_per_second(), 0);
  EXPECT_EQ(m.read(), 0);
  c.now += 1;
  EXPECT_EQ(m.read(), 0);
  EXPECT_EQ(m.samples_per_second(), 0);
}

TEST(CapacityMeter, CountsSamplesPerBusySecondOnceTheWindowHeldEnoughCompute) {
  FakeClock c(kStart);
  CapacityMeter m(c.clock());  // window 10 s, at least 2 s of compute
  m.read();
  c.now += 1;
  m.add_busy(1.5);
  m.add_completed(30);
  EXPECT_EQ(m.read(), 0);  // 1.5 s of compute: too little to count
  c.now += 1;
  m.add_busy(1.5);
  m.add_completed(60);
  EXPECT_DOUBLE_EQ(m.read(), 30.0);  // 90 samples in 3 busy seconds
  EXPECT_DOUBLE_EQ(m.samples_per_second(), 30.0);
  // Idle time (wall time without compute) does not lower the capacity.
  c.now += 3;
  EXPECT_DOUBLE_EQ(m.read(), 30.0);
}

TEST(CapacityMeter, TheWindowSlidesAndTheLastValueStaysWhileTooLittleComputeIsInIt) {
  FakeClock c(kStart);
  CapacityMeter m(c.clock(), /*window_seconds=*/10, /*min_busy_seconds=*/2);
  m.read();  // t = 0
  m.add_busy(4);
  m.add_completed(40);
  c.now += 5;
  EXPECT_DOUBLE_EQ(m.read(), 10.0);  // t = 5
  m.add_busy(4);
  m.add_completed(80);
  c.now += 5;
  EXPECT_DOUBLE_EQ(m.read(), 15.0);  // t = 10: 120 samples in 8 s (t = 0 is still the front)
  c.now += 5;
  // t = 15: the reading at t = 5 alone spans the window, so t = 0 goes; 80 samples in 4 s since.
  EXPECT_DOUBLE_EQ(m.read(), 20.0);
  c.now += 10;
  // t = 25: nothing since t = 10 or 15; the window holds no compute, the last value stays.
  EXPECT_DOUBLE_EQ(m.read(), 20.0);
}

}  // namespace
}  // namespace swarm::runtime
