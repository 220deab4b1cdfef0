// A stage server's activation store: what each forward leaves behind for its backward (the stage
// input, kept with its graph, and the output), keyed by microbatch id. Each entry is handed out
// once; entries older than the store's time to live, and those beyond its size limit, are dropped
// (a backward that comes later recomputes the forward from the stage input its trainer kept).
//
// Thread-safe (one mutex, a leaf: nothing is called with it held). The clock stamps each entry
// when it is kept and measures its age.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <torch/torch.h>

#include "common/thread_annotations.h"
#include "worker/runtime/clock.h"

namespace swarm::runtime {

// What a forward leaves behind for its backward.
struct Activation {
  torch::Tensor input;   // requires grad (except token ids of the first stage, or without output)
  torch::Tensor output;  // undefined when only the input is kept (spec.pipeline.recomputeActivations)
  int64_t samples = 0;
  int64_t step = 0;      // parameters it was computed with; stale after an optimizer step
  double created_at = 0;
};

class ActivationStore {
 public:
  // Entries live up to `ttl_seconds` (dropped once strictly older); at most `max_entries` stay.
  ActivationStore(Clock clock, double ttl_seconds, size_t max_entries);

  // Keeps a forward's activations, stamped with the clock. A repeated microbatch id replaces the
  // older entry (a trainer retried the forward).
  void put(const std::string& mb, torch::Tensor input, torch::Tensor output, int64_t samples,
           int64_t step);
  // Hands out the entry of `mb` and forgets it; nothing when there is none (never kept, taken
  // already, or expired).
  std::optional<Activation> take(const std::string& mb) EXCLUDES(mu_);

  // Drops the entries past their time to live, then, while more than max_entries are left, the
  // first ones in microbatch-id order. Returns how many went; `samples`, if given, is set to
  // their samples (admitted work whose backward will not run here).
  size_t expire(int64_t* samples = nullptr) EXCLUDES(mu_);
  // The microbatch ids of the entries kept at `step` (a backward of one of them needs no
  // recompute).
  std::set<std::string> ids(int64_t step) const EXCLUDES(mu_);
  // Drops every entry; returns their samples (forwards whose backward will not run here).
  int64_t clear() EXCLUDES(mu_);

  size_t size() const EXCLUDES(mu_);
  bool empty() const EXCLUDES(mu_);
  // Samples of the entries held: admitted work that is owed a backward.
  int64_t samples() const EXCLUDES(mu_);

 private:
  Clock clock_;
  const double ttl_;
  const size_t max_entries_;
  mutable swarm::Mutex mu_;
  std::map<std::string, Activation> entries_ GUARDED_BY(mu_);
  int64_t samples_ GUARDED_BY(mu_) = 0;
};

}  // namespace swarm::runtime
