// HostStaging: pooled host buffers and host <-> device copies. On the CPU the copies are plain
// and memory is ordinary; the CUDA test skips without a GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <thread>
#include <vector>

#include "worker/model/precision.h"
#include "worker/model/staging.h"

namespace swarm::model {
namespace {

TEST(HostStaging, BuffersAreReusedOnlyWhenReleased) {
  HostStaging staging;
  if (!torch::cuda::is_available()) EXPECT_FALSE(staging.pinned());
  const void* first_ptr;
  {
    auto a = staging.host_buffer({32, 64}, torch::kFloat);
    EXPECT_EQ(a.sizes(), (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(a.scalar_type(), torch::kFloat);
    EXPECT_TRUE(a.is_contiguous());
    EXPECT_EQ(a.is_pinned(), staging.pinned());
    a.fill_(1.0f);
    first_ptr = a.data_ptr();
  }
  // Same byte size, another shape and dtype: the same buffer comes back.
  auto b = staging.host_buffer({2048}, torch::kInt);
  EXPECT_EQ(b.data_ptr(), first_ptr);
  EXPECT_EQ(staging.stats().allocations, 1);
  EXPECT_EQ(staging.stats().reuses, 1);
  // While b (or a view of it) lives, the buffer is busy.
  auto view = b.narrow(0, 10, 5);
  b = torch::Tensor();
  auto c = staging.host_buffer({2048}, torch::kInt);
  EXPECT_NE(c.data_ptr(), first_ptr);
  EXPECT_EQ(staging.stats().allocations, 2);
  view = torch::Tensor();
  auto d = staging.host_buffer({8192}, torch::kByte);
  EXPECT_EQ(d.data_ptr(), first_ptr);
  EXPECT_EQ(staging.stats().buffers, 2u);
  EXPECT_EQ(staging.stats().cached_bytes, 2u * 8192u);
  // Zero-size requests bypass the pool.
  auto e = staging.host_buffer({0, 5}, torch::kFloat);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(staging.stats().buffers, 2u);
}

TEST(HostStaging, IdleBuffersBeyondTheLimitAreFreed) {
  HostStaging staging(true, /*max_idle_bytes=*/1000);
  for (int64_t n : {100, 200, 300, 400}) staging.host_buffer({n}, torch::kFloat);  // dropped
  // Each new buffer trims the idle ones (smallest first) down to 1000 bytes: 400 goes when 1200
  // arrives, 800 and 1200 when 1600 arrives.
  EXPECT_EQ(staging.stats().cached_bytes, 1600u);
  EXPECT_EQ(staging.stats().buffers, 1u);
  EXPECT_EQ(staging.stats().allocations, 4);
  staging.clear();
  EXPECT_EQ(staging.stats().buffers, 0u);
  EXPECT_EQ(staging.stats().cached_bytes, 0u);
}

TEST(HostStaging, RoundTripOnCpu) {
  HostStaging staging;
  const c10::Device cpu(c10::kCPU);
  auto x = torch::randn({3, 5, 7});
  auto on_dev = staging.to_device_async(x, cpu);
  EXPECT_TRUE(on_dev.device().is_cpu());
  EXPECT_TRUE(torch::equal(on_dev, x));
  auto back = staging.to_host_async(on_dev * 2);
  EXPECT_TRUE(back.ready());
  back.wait();
  EXPECT_TRUE(torch::equal(back.tensor, x * 2));
  // Non-contiguous input is made contiguous; int64 too.
  auto t = torch::arange(12, torch::kLong).view({3, 4}).t();
  auto moved = staging.to_device_async(t, cpu);
  EXPECT_TRUE(moved.is_contiguous());
  EXPECT_TRUE(torch::equal(moved, t));
  EXPECT_FALSE(staging.copy_stream(cpu).has_value());
  EXPECT_THROW(staging.to_device_async(torch::Tensor(), cpu), c10::Error);
}

TEST(HostStaging, ConcurrentUsersGetDistinctBuffers) {
  HostStaging staging;
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto buf = staging.host_buffer({256}, torch::kInt);
        buf.fill_(t);
        std::this_thread::yield();
        if (buf.min().item<int>() != t || buf.max().item<int>() != t) return;
      }
      ok[t] = 1;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 1) << "thread " << t << " saw another's data";
  EXPECT_LE(staging.stats().buffers, 4u);
}

TEST(HostStaging, CudaRoundTripWithSideStream) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  HostStaging staging;
  EXPECT_EQ(staging.pinned(), built_with_cuda());
  const c10::Device gpu(c10::kCUDA, 0);
  auto side = HostStaging::copy_stream(gpu);
  ASSERT_TRUE(side.has_value());
  for (int round = 0; round < 3; ++round) {
    auto x = torch::randn({64, 1024});
    auto d1 = staging.to_device_async(x, gpu);               // current stream
    auto d2 = staging.to_device_async(x * 3, gpu, side);     // side stream, current waits
    auto y = (d1 + d2).mul_(0.5);                             // on the current stream
    auto h1 = staging.to_host_async(y);
    auto h2 = staging.to_host_async(y, side);
    h1.wait();
    h2.wait();
    EXPECT_TRUE(torch::allclose(h1.tensor, x * 2));
    EXPECT_TRUE(torch::equal(h1.tensor, h2.tensor));
    EXPECT_EQ(h1.tensor.is_pinned(), staging.pinned());
  }
  EXPECT_GT(staging.stats().reuses, 0);
}

}  // namespace
}  // namespace swarm::model
