// A stage's checkpoints written by a thread of their own. The step's thread copies the state
// (model::save_state, the only part that must see the parameters between two steps) and submits
// it; authenticating, writing and uploading it (checkpoint.h) happen here, so a slow disk or an
// object store never holds up the next step (at hidden size 1024: 0.6 s of copying stays in the
// step, 2.3 s of writing to MinIO leaves it; docs/benchmarks.md).
//
// At most one checkpoint is written at a time and one waits: a newer submission replaces the
// waiting one (the newest state is the one worth keeping). flush() waits until both are done;
// the destructor flushes, then ends the thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "common/thread_annotations.h"

namespace swarm::runtime {

struct CheckpointJob {
  int stage = 0;
  int64_t step = 0;
  std::string state;  // model::save_state's bytes
};

class CheckpointWriter {
 public:
  // `write` runs on the writer's thread, one job at a time; it reports its own failures.
  // `write` may take the job's state (move it): the writer drops the job after the call.
  explicit CheckpointWriter(std::function<void(CheckpointJob&)> write);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void submit(CheckpointJob job) EXCLUDES(mu_);
  void flush() EXCLUDES(mu_);
  // Jobs replaced before they were written (a newer one came while they waited).
  int64_t superseded() const EXCLUDES(mu_);

 private:
  void run() EXCLUDES(mu_);

  std::function<void(CheckpointJob&)> write_;
  mutable swarm::Mutex mu_;
  swarm::CondVar cv_;
  std::optional<CheckpointJob> waiting_ GUARDED_BY(mu_);
  bool writing_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  int64_t superseded_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace swarm::runtime
