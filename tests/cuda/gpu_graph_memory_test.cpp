// Memory that a captured graph points into, on a real device (suite Gpu*,
// label gpu; skips without a device):
// - a live graph keeps its workspace when the workspace grows or is
//   released: the pool must not hand those bytes to anything else;
// - a capture that needs the pool to grow (cudaMalloc, which thread-local
//   capture forbids) still captures.
#include <gtest/gtest.h>

#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "cuda_device.hpp"
#include "stoke/config.hpp"

namespace stoke::cuda {
namespace {

class GpuGraphMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = missing_cuda_device(); !why.empty()) GTEST_SKIP() << why;
    be_ = std::make_unique<CudaBackend>(0, MemoryPool::device(Settings{}, 0), CudaBackendOptions{});
  }
  std::unique_ptr<CapturedStep> capture_memset(void* p, std::size_t bytes) {
    std::string why;
    auto graph =
        be_->capture([&] { STOKE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, be_->stream())); }, &why);
    EXPECT_TRUE(graph) << why;
    return graph;
  }
  std::unique_ptr<CudaBackend> be_;
};

TEST_F(GpuGraphMemory, ALiveGraphKeepsItsWorkspaceWhenItGrowsOrIsReleased) {
  constexpr std::size_t kSmall = 1 << 20, kLarge = 8 << 20;
  void* w1 = be_->workspace(kSmall);
  auto g1 = capture_memset(w1, kSmall);
  ASSERT_TRUE(g1);
  void* w2 = be_->workspace(kLarge);  // grows while g1 points into w1
  EXPECT_NE(w2, w1);
  be_->synchronize();  // nothing pending: a freed w1 would be reused at once
  void* a = be_->allocate(kSmall);
  EXPECT_NE(a, w1) << "the live graph's workspace was handed out again";
  auto g2 = capture_memset(w2, kLarge);
  ASSERT_TRUE(g2);
  be_->release_workspace();  // eager code between replays may do this
  be_->synchronize();
  void* b = be_->allocate(kLarge);
  EXPECT_NE(b, w2) << "the live graph's released workspace was handed out again";
  g1->replay();
  g2->replay();
  be_->synchronize();
  be_->free(a, kSmall);
  be_->free(b, kLarge);
  const std::uint64_t before = be_->pool_stats().in_use;
  g1.reset();
  g2.reset();
  be_->synchronize();
  EXPECT_LT(be_->pool_stats().in_use, before) << "the retired blocks go back once no graph is left";
}

TEST_F(GpuGraphMemory, ACaptureThatGrowsThePoolStillCaptures) {
  const std::uint64_t reserved = be_->pool_stats().reserved;
  constexpr std::size_t kBytes = 256ull << 20;
  void* p = nullptr;
  std::string why;
  auto graph = be_->capture(
      [&] {
        p = be_->allocate(kBytes);  // more than the pool holds: it must grow
        STOKE_CUDA_CHECK(cudaMemsetAsync(p, 0, kBytes, be_->stream()));
        be_->free(p, kBytes);
      },
      &why);
  ASSERT_TRUE(graph) << why;
  EXPECT_GT(be_->pool_stats().reserved, reserved);
  graph->replay();
  be_->synchronize();
}

}  // namespace
}  // namespace stoke::cuda
