// The stage's checkpoint writer thread: one write at a time, the newest waiting state replaces an
// older waiting one, flush() and the destructor wait for what was submitted.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "worker/checkpoint/writer.h"

namespace {

using swarm::runtime::CheckpointJob;
using swarm::runtime::CheckpointWriter;

// A write that blocks until released, recording the steps it wrote.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false, entered = false;
  std::vector<int64_t> written;
  void write(const CheckpointJob& j) {
    std::unique_lock<std::mutex> lk(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
    written.push_back(j.step);
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(CheckpointWriter, TheNewestWaitingStateReplacesAnOlderOneAndFlushWaitsForBoth) {
  Gate gate;
  CheckpointWriter w([&](const CheckpointJob& j) { gate.write(j); });
  w.submit({0, 10, "a"});
  gate.wait_entered();  // step 10 is being written
  w.submit({0, 20, "b"});
  w.submit({0, 30, "c"});  // replaces 20, which never started
  EXPECT_EQ(w.superseded(), 1);
  gate.release();
  w.flush();
  std::lock_guard<std::mutex> lk(gate.mu);
  EXPECT_EQ(gate.written, (std::vector<int64_t>{10, 30}));
}

TEST(CheckpointWriter, TheDestructorWritesWhatWasSubmittedAndAThrowingWriteDoesNotEndTheThread) {
  std::vector<int64_t> written;
  {
    CheckpointWriter w([&](const CheckpointJob& j) {
      if (j.step == 1) throw std::runtime_error("disk full");
      written.push_back(j.step);
    });
    w.submit({1, 1, "x"});
    w.flush();
    w.submit({1, 2, "y"});
  }
  EXPECT_EQ(written, (std::vector<int64_t>{2}));
}

}  // namespace
