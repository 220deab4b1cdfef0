#include "worker/stage/capacity_meter.h"

namespace swarm::runtime {

CapacityMeter::CapacityMeter(Clock clock, double window_seconds, double min_busy_seconds)
    : clock_(std::move(clock)), window_(window_seconds), min_busy_(min_busy_seconds) {}

void CapacityMeter::add_busy(double seconds) {
  swarm::MutexLock lk(mu_);
  busy_ += seconds;
}

void CapacityMeter::add_completed(int64_t samples) {
  swarm::MutexLock lk(mu_);
  completed_ += samples;
}

double CapacityMeter::read() {
  const double t = clock_();
  swarm::MutexLock lk(mu_);
  readings_.push_back({t, busy_, completed_});
  // The oldest reading goes once the next one alone spans the window.
  while (readings_.size() > 2 && t - readings_[1].at >= window_) readings_.pop_front();
  const double busy = readings_.back().busy - readings_.front().busy;
  if (busy > min_busy_)
    samples_per_second_ =
        static_cast<double>(readings_.back().completed - readings_.front().completed) / busy;
  return samples_per_second_;
}

double CapacityMeter::samples_per_second() const {
  swarm::MutexLock lk(mu_);
  return samples_per_second_;
}

}  // namespace swarm::runtime
