// STOKE_CPU_SIMD reaches oneDNN: a context forcing AVX2 caps oneDNN's
// instruction set (its convolutions run AVX2 kernels in the 8-channel blocked
// layout), while the backend's own kernels follow each context. One process
// per test (CTest): oneDNN takes its cap once, before its first primitive.
#include "backend/cpu/conv2d_blocked.hpp"
#include "backend/cpu/conv2d_dnnl.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/dnnl_isa.hpp"
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"
#include "stoke/runtime.hpp"
#include "stoke/system.hpp"

namespace stoke::testing {
namespace {

Config forcing(const char* simd, const char* threads) {
  Config c;
  c.set("STOKE_GPU_DEVICE", "cpu");
  c.set("STOKE_CUDA_PLUGIN", "off");
  c.set("STOKE_CPU_SIMD", simd);
  c.set("STOKE_CPU_THREADS", threads);
  return c;
}

SimdLevel best_simd() {
  return query_cpu().simd;
}

TEST(LibraryIsa, ForcedAvx2CapsOneDnnAndEachBackendKeepsItsOwnKernels) {
  if (!cpu::dnnl_conv::enabled()) GTEST_SKIP() << "built without oneDNN";
  if (best_simd() < SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 here: nothing to cap";
  const Context avx2(forcing("avx2", "1"));
  const Context wide(forcing("auto", "2"));
  const auto a = make_backend(avx2);
  const auto b = make_backend(wide);
  if (!cpu::cap_library_isa(avx2)) GTEST_SKIP() << "oneDNN ran before this test in this process";
  const Conv2dParams same{1, 1, 1, 1, 1, 1, 1};
  const std::string kernels = cpu::dnnl_conv::batch_kernels({2, 32, 28, 28}, {32, 32, 3, 3}, same);
  EXPECT_EQ(kernels.find("avx512"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("avx2"), std::string::npos) << kernels;
  EXPECT_EQ(cpu::blocked::block_channels(), 8);
  // stoke's own kernels and chunking follow each backend's context.
  const auto& cpu_a = dynamic_cast<const cpu::CpuBackend&>(*a);
  const auto& cpu_b = dynamic_cast<const cpu::CpuBackend&>(*b);
  EXPECT_EQ(std::string(cpu_a.simd_kernels().name), cpu::simd_kernels(SimdLevel::kAvx2).name);
  EXPECT_EQ(std::string(cpu_b.simd_kernels().name), cpu::simd_kernels(best_simd()).name);
  EXPECT_EQ(cpu_a.chunks(), 1);
  EXPECT_EQ(cpu_b.chunks(), 2);
  // A convolution still matches the naive reference under the cap.
  Tensor x = random_tensor(*a, {2, 8, 9, 9}, 1), w = random_tensor(*a, {8, 8, 3, 3}, 2), none;
  Tensor y(*a, {2, 8, 9, 9}), want(*a, {2, 8, 9, 9});
  a->conv2d_forward(x, w, none, y, same);
  cpu::naive::conv2d_forward(x, w, none, want, same);
  EXPECT_TRUE(close(y, want, tolerance(Accuracy::kConvolution, 72), "conv under the AVX2 cap"));
}

TEST(LibraryIsa, AnAutomaticContextLeavesOneDnnAlone) {
  EXPECT_FALSE(cpu::cap_library_isa(Context(forcing("auto", "1"))));
}

}  // namespace
}  // namespace stoke::testing
