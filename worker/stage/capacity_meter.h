// A stage server's capacity: samples completed per second of compute, what its heartbeat reports
// (PeerRecord::samples_per_second) and the rebalancer compares stages with.
//
// Capacity, not current rate: the reading covers a sliding window of wall time (window_seconds)
// and counts only once the compute thread was busy for min_busy_seconds of it. Per-heartbeat
// readings swing by tens of percent with the microbatch mix and the machine's other load; the
// rebalancer needs a reading steadier than its min_gain.
//
// Thread-safe (one mutex, a leaf: nothing is called with it held). The clock times the readings.
#pragma once

#include <cstdint>
#include <deque>

#include "common/thread_annotations.h"
#include "worker/runtime/clock.h"

namespace swarm::runtime {

class CapacityMeter {
 public:
  static constexpr double kWindowSeconds = 10;
  static constexpr double kMinBusySeconds = 2.0;

  explicit CapacityMeter(Clock clock, double window_seconds = kWindowSeconds,
                         double min_busy_seconds = kMinBusySeconds);

  void add_busy(double seconds) EXCLUDES(mu_);  // compute time the stage spent on a request
  void add_completed(int64_t samples) EXCLUDES(mu_);  // samples whose backward ran here

  // Takes a reading now (each heartbeat) and returns samples_per_second() after it.
  double read() EXCLUDES(mu_);
  // The latest capacity: completed samples per busy second over the window; 0 until a window held
  // enough compute time, then the last such value until another does.
  double samples_per_second() const EXCLUDES(mu_);

 private:
  struct Reading {
    double at, busy;
    int64_t completed;
  };

  Clock clock_;
  const double window_;
  const double min_busy_;
  mutable swarm::Mutex mu_;
  double busy_ GUARDED_BY(mu_) = 0;
  int64_t completed_ GUARDED_BY(mu_) = 0;
  std::deque<Reading> readings_ GUARDED_BY(mu_);
  double samples_per_second_ GUARDED_BY(mu_) = 0;
};

}  // namespace swarm::runtime
