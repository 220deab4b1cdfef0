// HostStaging: host <-> device copies for a worker's requests without blocking its compute.
//
// Host buffers come from a small pool keyed by byte size and are reused across requests; they are
// page-locked (pinned) when this libtorch has CUDA and a GPU is visible, so CUDA copies run
// asynchronously (non_blocking) and a request's transfer overlaps with the compute already queued
// on the device. Without CUDA (a CPU-only build, or no GPU) buffers are ordinary memory and the
// copy functions degrade to plain, synchronous behaviour — nothing fails.
//
// Only generic c10 stream/event interfaces are used, so this compiles against any libtorch.
// Device tensors come from libtorch's caching allocator: after warm-up no request allocates
// device memory from the driver.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/Optional.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/thread_annotations.h"

namespace c10 {
class Event;
}

namespace swarm::model {

// A device -> host copy in flight. `tensor` may be read once wait() returned (or ready() is true).
struct HostCopy {
  at::Tensor tensor;
  std::shared_ptr<c10::Event> done;  // null when the copy was synchronous
  bool ready() const;
  void wait() const;  // blocks the calling thread only
};

class HostStaging {
 public:
  // pin: use page-locked memory when possible (CUDA build + visible GPU); max_idle_bytes: idle
  // buffers beyond this are freed (the one being handed out is always kept).
  explicit HostStaging(bool pin = true, size_t max_idle_bytes = size_t(1) << 30);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  bool pinned() const { return pinned_; }  // buffers are page-locked

  // A contiguous host tensor of `sizes` x `dtype` backed by a pooled buffer of that many bytes.
  // A buffer is handed out again only once every tensor viewing it was dropped and its last
  // asynchronous copy finished. Contents are unspecified. Thread-safe.
  at::Tensor host_buffer(at::IntArrayRef sizes, c10::ScalarType dtype) EXCLUDES(mu_);

  // Host -> device. CUDA: `host` is copied into a pooled pinned buffer (unless it is one already)
  // and from there with non_blocking=true on `stream` (default: the device's current stream).
  // With a side stream, the current stream is made to wait for the copy on the device (the host
  // never waits), so the result can be used on the current stream straight away while the copy
  // overlaps with earlier queued work. CPU device: returns `host` (made contiguous), no copy.
  at::Tensor to_device_async(const at::Tensor& host, c10::Device device,
                             c10::optional<c10::Stream> stream = c10::nullopt) EXCLUDES(mu_);

  // Device -> host into a pooled buffer. CUDA: the copy runs on `stream` (default: current) after
  // the work already queued on the current stream, non_blocking; call wait() before reading.
  // CPU tensor: returns it (contiguous, detached), already ready.
  HostCopy to_host_async(const at::Tensor& tensor,
                         c10::optional<c10::Stream> stream = c10::nullopt) EXCLUDES(mu_);

  // A stream for copies on `device` from libtorch's pool; nullopt for a non-CUDA device.
  static c10::optional<c10::Stream> copy_stream(c10::Device device);

  struct Stats {
    int64_t allocations = 0;  // buffers created
    int64_t reuses = 0;       // buffers handed out again
    size_t cached_bytes = 0;  // bytes held by the pool (in use or idle)
    size_t buffers = 0;
  };
  Stats stats() const EXCLUDES(mu_);
  void clear() EXCLUDES(mu_);  // frees the idle buffers

 private:
  struct Entry;
  Entry* entry_for(const at::Tensor& t) REQUIRES(mu_);  // the pool entry whose storage t views
  void trim_locked(const Entry* keep) REQUIRES(mu_);

  std::atomic<bool> pinned_{false};  // written under mu_, read without it
  size_t max_idle_bytes_;
  mutable swarm::Mutex mu_;
  std::multimap<size_t, std::unique_ptr<Entry>> pool_ GUARDED_BY(mu_);  // by byte size
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace swarm::model
