// The device normalize kernel is valid CUDA for every architecture stoke
// supports: NVRTC compiles it to a cubin for each (no GPU needed).
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <string>
#include <vector>

#include "backend/cuda/normalize_kernel.hpp"

namespace {

class NormalizeKernelNvrtc : public ::testing::TestWithParam<const char*> {};

TEST_P(NormalizeKernelNvrtc, CompilesToACubin) {
  nvrtcProgram program = nullptr;
  ASSERT_EQ(nvrtcCreateProgram(&program, stoke::cuda::kNormalizeKernelSource, "normalize.cu", 0,
                               nullptr, nullptr),
            NVRTC_SUCCESS);
  const std::string arch = std::string("--gpu-architecture=") + GetParam();
  const char* options[] = {arch.c_str(), "--std=c++17"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 2, options);
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(program, log.data());
  ASSERT_EQ(compiled, NVRTC_SUCCESS) << nvrtcGetErrorString(compiled) << "\n" << log;
  std::size_t cubin_size = 0;
  ASSERT_EQ(nvrtcGetCUBINSize(program, &cubin_size), NVRTC_SUCCESS);
  EXPECT_GT(cubin_size, 0u);
  std::vector<char> cubin(cubin_size);
  ASSERT_EQ(nvrtcGetCUBIN(program, cubin.data()), NVRTC_SUCCESS);
  // An ELF image that names the kernel (extern "C": unmangled).
  EXPECT_EQ(std::string(cubin.data() + 1, 3), "ELF");
  EXPECT_NE(std::string(cubin.begin(), cubin.end()).find(stoke::cuda::kNormalizeKernelName),
            std::string::npos);
  nvrtcDestroyProgram(&program);
}

INSTANTIATE_TEST_SUITE_P(Architectures, NormalizeKernelNvrtc,
                         ::testing::Values("sm_75", "sm_80", "sm_86", "sm_89", "sm_90"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
