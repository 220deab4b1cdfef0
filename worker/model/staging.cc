#include "worker/model/staging.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace swarm::model {

struct HostStaging::Entry {
  c10::Storage storage;
  size_t nbytes = 0;
  std::shared_ptr<c10::Event> last_use;  // the last asynchronous copy that touched it

  // Free when only the pool references the storage and no copy is in flight.
  bool idle() const { return storage.use_count() == 1 && (!last_use || last_use->query()); }
};

bool HostCopy::ready() const { return !done || done->query(); }

void HostCopy::wait() const {
  if (!done) return;
  for (int i = 0; !done->query(); ++i) {
    if (i < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

HostStaging::HostStaging(bool pin, size_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {
#ifdef SWARM_MODEL_CUDA
  pinned_ = pin && torch::cuda::is_available();
#else
  (void)pin;  // a CPU-only libtorch has no pinned-memory allocator
  pinned_ = false;
#endif
}

HostStaging::~HostStaging() {
  // Copies still in flight read or write the buffers: let them finish first.
  swarm::MutexLock lk(mu_);
  for (auto& [size, e] : pool_) {
    if (e->last_use) HostCopy{at::Tensor(), e->last_use}.wait();
  }
}

HostStaging::Entry* HostStaging::entry_for(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  const auto* impl = t.storage().unsafeGetStorageImpl();
  for (auto& [size, e] : pool_) {
    if (e->storage.unsafeGetStorageImpl() == impl) return e.get();
  }
  return nullptr;
}

void HostStaging::trim_locked(const Entry* keep) {
  size_t idle = 0;
  for (auto& [size, e] : pool_) {
    if (e.get() != keep && e->idle()) idle += size;
  }
  for (auto it = pool_.begin(); it != pool_.end() && idle > max_idle_bytes_;) {
    if (it->second.get() != keep && it->second->idle()) {
      idle -= it->first;
      stats_.cached_bytes -= it->first;
      it = pool_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.buffers = pool_.size();
}

at::Tensor HostStaging::host_buffer(at::IntArrayRef sizes, c10::ScalarType dtype) {
  const auto opts = at::TensorOptions().dtype(dtype);
  int64_t numel = 1;
  for (auto s : sizes) numel *= s;
  const size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  if (nbytes == 0) return at::empty(sizes, opts);

  swarm::MutexLock lk(mu_);
  Entry* found = nullptr;
  auto range = pool_.equal_range(nbytes);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second->idle()) {
      found = it->second.get();
      break;
    }
  }
  if (found) {
    ++stats_.reuses;
  } else {
    at::Tensor bytes;
    const auto byte_opts = at::TensorOptions().dtype(at::kByte);
    if (pinned_) {
      try {
        bytes = at::empty({static_cast<int64_t>(nbytes)}, byte_opts.pinned_memory(true));
      } catch (const c10::Error&) {
        pinned_ = false;  // no pinned allocator after all: ordinary memory from now on
      }
    }
    if (!bytes.defined()) bytes = at::empty({static_cast<int64_t>(nbytes)}, byte_opts);
    auto e = std::make_unique<Entry>();
    e->storage = bytes.storage();
    e->nbytes = nbytes;
    found = e.get();
    pool_.emplace(nbytes, std::move(e));
    ++stats_.allocations;
    stats_.cached_bytes += nbytes;
    trim_locked(found);
  }
  found->last_use.reset();
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(sizes[i], 1);
  return at::empty({0}, opts).set_(found->storage, 0, sizes, strides);
}

at::Tensor HostStaging::to_device_async(const at::Tensor& host, c10::Device device,
                                        c10::optional<c10::Stream> stream) {
  TORCH_CHECK(host.defined(), "to_device_async: undefined tensor");
  TORCH_CHECK(host.device().is_cpu(), "to_device_async: expected a host tensor, got ",
              host.device());
  auto src = host.detach();
  if (!src.is_contiguous()) src = src.contiguous();
  if (!device.is_cuda()) return src.device() == device ? src : src.to(device);

  c10::impl::VirtualGuardImpl impl(device.type());
  c10::DeviceGuard device_guard(device);
  const c10::Stream current = impl.getStream(device);
  const c10::Stream copy_on = stream.value_or(current);

  at::Tensor staged;
  bool pooled;
  {
    swarm::MutexLock lk(mu_);
    pooled = entry_for(src) != nullptr;
  }
  if (pooled || src.numel() == 0) {
    staged = src;
  } else {
    staged = host_buffer(src.sizes(), src.scalar_type());
    staged.copy_(src);
  }
  auto done = std::make_shared<c10::Event>(device.type());
  at::Tensor dst;
  {
    // Allocated and written on the copy stream, so the caching allocator orders its reuse there.
    c10::StreamGuard stream_guard(copy_on);
    dst = at::empty(src.sizes(), at::TensorOptions().dtype(src.scalar_type()).device(device));
    dst.copy_(staged, /*non_blocking=*/true);
    done->record(copy_on);
  }
  {
    swarm::MutexLock lk(mu_);
    if (auto* e = entry_for(staged)) e->last_use = done;
  }
  if (copy_on != current) {
    done->block(current);  // the device waits, not the host
    if (dst.numel() > 0) impl.recordDataPtrOnStream(dst.storage().data_ptr(), current);
  }
  return dst;
}

HostCopy HostStaging::to_host_async(const at::Tensor& tensor, c10::optional<c10::Stream> stream) {
  TORCH_CHECK(tensor.defined(), "to_host_async: undefined tensor");
  auto src = tensor.detach();
  if (!src.device().is_cuda()) {
    if (!src.device().is_cpu()) src = src.cpu();
    return HostCopy{src.is_contiguous() ? src : src.contiguous(), nullptr};
  }
  if (!src.is_contiguous()) src = src.contiguous();  // queued on the current stream
  const c10::Device device = src.device();
  c10::impl::VirtualGuardImpl impl(device.type());
  c10::DeviceGuard device_guard(device);
  const c10::Stream current = impl.getStream(device);
  const c10::Stream copy_on = stream.value_or(current);

  auto dst = host_buffer(src.sizes(), src.scalar_type());
  if (src.numel() == 0) return HostCopy{dst, nullptr};
  if (copy_on != current) {
    c10::Event produced(device.type());
    produced.record(current);
    produced.block(copy_on);
    // src may be freed on the current stream before the copy ran: keep its memory until then.
    impl.recordDataPtrOnStream(src.storage().data_ptr(), copy_on);
  }
  auto done = std::make_shared<c10::Event>(device.type());
  {
    c10::StreamGuard stream_guard(copy_on);
    dst.copy_(src, /*non_blocking=*/true);
    done->record(copy_on);
  }
  {
    swarm::MutexLock lk(mu_);
    if (auto* e = entry_for(dst)) e->last_use = done;
  }
  return HostCopy{dst, done};
}

c10::optional<c10::Stream> HostStaging::copy_stream(c10::Device device) {
  if (!device.is_cuda()) return c10::nullopt;
  c10::impl::VirtualGuardImpl impl(device.type());
  return impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
}

HostStaging::Stats HostStaging::stats() const {
  swarm::MutexLock lk(mu_);
  return stats_;
}

void HostStaging::clear() {
  swarm::MutexLock lk(mu_);
  for (auto it = pool_.begin(); it != pool_.end();) {
    if (it->second->idle()) {
      stats_.cached_bytes -= it->first;
      it = pool_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.buffers = pool_.size();
}

}  // namespace swarm::model
