// CUDA backend paths that need its internals, on a real device (suites Gpu*,
// label gpu; skip without a device):
// - two threads issuing convolutions on one backend agree bit for bit with
//   one thread (the shared per-shape descriptors and the workspace are
//   locked), also while one of them overruns the descriptor cache;
// - the descriptor cache stays bounded and a shape evicted and built again
//   gives the same bits;
// - a JIT cubin that does not load falls back to the precompiled kernels;
// - custom elementwise kernels are right past 2^31 elements.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "backend/cuda/conv2d.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/jit.hpp"
#include "backend/cuda/kernels.hpp"
#include "cuda_device.hpp"
#include "stoke/config.hpp"

namespace stoke::cuda {
namespace {

std::vector<float> pattern(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  return v;
}

class GpuConvCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = missing_cuda_device(); !why.empty()) GTEST_SKIP() << why;
    CudaBackendOptions options;
    options.deterministic = true;  // bit-equal results run to run
    be_ = std::make_unique<CudaBackend>(0, MemoryPool::device(Settings{}, 0), options);
  }
  // Forward and backward of one convolution of x (2, c, h, h) by w (8, c, 3, 3):
  // y, dx and dw, copied to the host (the copies wait for the stream).
  std::vector<float> conv_pass(int c, int h, unsigned seed) {
    const Shape xs{2, c, h, h}, ws{8, c, 3, 3};
    const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
    Tensor x(*be_, xs), w(*be_, ws);
    const auto xv = pattern(static_cast<std::size_t>(shape_numel(xs)), seed);
    const auto wv = pattern(static_cast<std::size_t>(shape_numel(ws)), seed + 1);
    x.copy_from_host(xv.data());
    w.copy_from_host(wv.data());
    Tensor y(*be_, conv2d_output_shape(xs, ws, p)), dx(*be_, xs), dw(*be_, ws), db;
    be_->conv2d_forward(x, w, Tensor(), y, p);
    be_->conv2d_backward(x, w, y, dx, dw, db, p);
    std::vector<float> out = y.to_vector();
    for (const Tensor* t : {&dx, &dw}) {
      const auto v = t->to_vector();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  std::unique_ptr<CudaBackend> be_;
};

// One thread repeats one shape; the other walks through more shapes than the
// cache holds (evicting the first thread's setup while it uses it) and
// grows the workspace. Every result equals the one-thread result bit for bit.
TEST_F(GpuConvCache, TwoThreadsOnOneBackendAgreeWithOneThread) {
  constexpr int kShapes = 300, kRepeats = 40;
  const std::vector<float> fixed = conv_pass(16, 20, 1);
  std::vector<std::vector<float>> walked;
  for (int i = 0; i < kShapes; ++i) walked.push_back(conv_pass(1 + i % 8, 4 + i / 8, 100 + i));
  int fixed_mismatches = 0, walked_mismatches = 0;
  std::string error;
  std::thread repeater([&] {
    try {
      for (int r = 0; r < kRepeats; ++r)
        if (!same_bits(conv_pass(16, 20, 1), fixed)) ++fixed_mismatches;
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  for (int i = 0; i < kShapes; ++i)
    if (!same_bits(conv_pass(1 + i % 8, 4 + i / 8, 100 + i), walked[static_cast<std::size_t>(i)]))
      ++walked_mismatches;
  repeater.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(fixed_mismatches, 0) << "of " << kRepeats << " repeats of one shape";
  EXPECT_EQ(walked_mismatches, 0) << "of " << kShapes << " shapes";
  EXPECT_LE(be_->conv_setups_cached(), 256u);
}

// Past 256 shapes the cache starts over; a shape built again gives the
// same bits as before its eviction.
TEST_F(GpuConvCache, EvictedShapesAreBuiltAgainWithTheSameResult) {
  const std::vector<float> first = conv_pass(3, 9, 7);
  for (int i = 0; i < 260; ++i) conv_pass(1 + i % 4, 5 + i / 4, 500 + i);
  EXPECT_LE(be_->conv_setups_cached(), 256u);
  EXPECT_LT(be_->conv_setups_cached(), 260u) << "the cache was never evicted";
  EXPECT_TRUE(same_bits(conv_pass(3, 9, 7), first));
}

// A cached cubin with a valid header and checksum that the driver refuses to
// load (not an ELF image): the backend's kernels come from the precompiled
// build, with a warning, and work.
TEST(GpuJitFallback, ACubinThatDoesNotLoadFallsBackToPrecompiledKernels) {
  if (const std::string why = missing_cuda_device(); !why.empty()) GTEST_SKIP() << why;
  const auto dir = std::filesystem::temp_directory_path() / "stoke_gpu_jit_fallback_test";
  std::filesystem::remove_all(dir);
  const JitCache cache(dir);
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
  const std::vector<char> garbage(4096, 'x');
  for (const auto& source : kernel_sources())
    ASSERT_TRUE(cache.store(cache.key(source, major * 10 + minor), garbage));
  const KernelSet kernels(0, true, cache);
  EXPECT_EQ(kernels.origin(), KernelOrigin::kPrecompiled);
  float* y = nullptr;
  ASSERT_EQ(cudaMalloc(&y, 1000 * sizeof(float)), cudaSuccess);
  float value = 3.5f;
  long long n = 1000;
  void* args[] = {&y, &value, &n};
  launch(kernels.function("stoke_fill"), grid_for(n), dim3(256), args, nullptr, "stoke_fill");
  std::vector<float> host(1000);
  ASSERT_EQ(cudaMemcpy(host.data(), y, host.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(y);
  EXPECT_EQ(host.front(), 3.5f);
  EXPECT_EQ(host.back(), 3.5f);
  std::filesystem::remove_all(dir);
}

// The elementwise kernels index with 64 bits: a tensor of 2^31 + 16 floats
// (8 GiB) is filled, scaled and rectified to its last element.
TEST(GpuLargeTensors, ElementwiseKernelsAreRightPast2To31Elements) {
  if (const std::string why = missing_cuda_device(); !why.empty()) GTEST_SKIP() << why;
  CudaBackend be(0, MemoryPool::device(Settings{}, 0), CudaBackendOptions{});
  const std::int64_t n = (std::int64_t{1} << 31) + 16;
  Tensor x(be, {n});
  be.fill(x, -1.5f);
  be.scale(x, 2.0f);
  auto tail = [&](std::int64_t from) {
    std::vector<float> v(16);
    be.copy(v.data(), x.data<float>() + from, v.size() * sizeof(float), CopyKind::kDeviceToHost);
    be.synchronize();
    return v;
  };
  for (float v : tail(n - 16)) EXPECT_EQ(v, -3.0f);
  for (float v : tail((std::int64_t{1} << 31) - 8)) EXPECT_EQ(v, -3.0f);
  be.relu_forward(x, x);
  for (float v : tail(n - 16)) EXPECT_EQ(v, 0.0f);
  for (float v : tail(0)) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace stoke::cuda
