// The CUDA backend's libstoke surface where no device runs it: GraphedStep is
// eager on the CPU backend and says why, creating a CUDA backend without a
// device is an error that says why, and the registry still answers.
#include <gtest/gtest.h>

#include "stoke/backend.hpp"
#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "stoke/system.hpp"

namespace stoke {
namespace {

TEST(GraphedStep, RunsEagerlyOnAHostBackendAndSaysWhy) {
  GraphedStep graphed(cpu_backend(), Toggle::kOn);
  int runs = 0;
  for (int i = 0; i < 3; ++i) graphed.run([&] { ++runs; });
  EXPECT_EQ(runs, 3);
  EXPECT_FALSE(graphed.replaying());
  EXPECT_NE(graphed.eager_reason().find("cpu"), std::string::npos) << graphed.eager_reason();
  EXPECT_EQ(graphed.calls(), 3);
  graphed.run([&] { ++runs; }, 42);  // a new key is still eager here
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(graphed.captures(), 0);
}

TEST(GraphedStep, KnobOffIsEagerWithTheKnobNamed) {
  GraphedStep graphed(cpu_backend(), Toggle::kOff);
  int runs = 0;
  graphed.run([&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_NE(graphed.eager_reason().find("STOKE_GPU_GRAPH"), std::string::npos);
}

TEST(CudaBackendApi, HostBackendIsNotAGpuBackend) {
  EXPECT_EQ(as_gpu_backend(cpu_backend()), nullptr);
}

TEST(CudaBackendApi, CreatingWithoutADeviceIsAnErrorThatSaysWhy) {
  if (!query_system().cuda.gpus.empty())
    GTEST_SKIP() << "a CUDA device exists here (covered by CudaParity)";
  try {
    create_cuda_backend(0, Settings{});
    FAIL() << "no error without a device";
  } catch (const Error& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
  // The registry then holds no CUDA backend and the default is the CPU.
  EXPECT_EQ(find_backend("cuda:0"), nullptr);
  EXPECT_EQ(&default_backend(), &cpu_backend());
}

TEST(CudaBackendApi, OptionsFollowTheJitKnob) {
  Settings s;
  s.gpu_jit = Toggle::kOff;
  EXPECT_EQ(cuda_backend_options(s).jit, Toggle::kOff);
  EXPECT_FALSE(cuda_backend_options(s).strict_fp32) << "TF32 is allowed by default";
}

}  // namespace
}  // namespace stoke
