#include "worker/checkpoint/writer.h"

#include <utility>

namespace swarm::runtime {

CheckpointWriter::CheckpointWriter(std::function<void(CheckpointJob&)> write) : write_(std::move(write)) {
  thread_ = std::thread([this] { run(); });
}

CheckpointWriter::~CheckpointWriter() {
  flush();
  {
    swarm::MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointWriter::submit(CheckpointJob job) {
  {
    swarm::MutexLock lk(mu_);
    if (waiting_) ++superseded_;
    waiting_ = std::move(job);
  }
  cv_.notify_all();
}

void CheckpointWriter::flush() {
  swarm::MutexLock lk(mu_);
  cv_.wait(mu_, [this]() REQUIRES(mu_) { return !waiting_ && !writing_; });
}

int64_t CheckpointWriter::superseded() const {
  swarm::MutexLock lk(mu_);
  return superseded_;
}

void CheckpointWriter::run() {
  swarm::MutexLock lk(mu_);
  for (;;) {
    cv_.wait(mu_, [this]() REQUIRES(mu_) { return stop_ || waiting_.has_value(); });
    if (!waiting_) return;  // stopping, nothing left
    CheckpointJob job = std::move(*waiting_);
    waiting_.reset();
    writing_ = true;
    lk.unlock();
    try {
      write_(job);
    } catch (...) {
      // `write` reports its own failures; one that escapes must not end the writer.
    }
    lk.lock();
    writing_ = false;
    cv_.notify_all();
  }
}

}  // namespace swarm::runtime
