#include "backend/cuda/device_normalize.hpp"

#include <nvrtc.h>

#include <algorithm>

#include <string>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/normalize_kernel.hpp"

namespace stoke::cuda {

NormalizeKernel::~NormalizeKernel() {
  if (library_) STOKE_CUDA_WARN(cudaLibraryUnload(library_));
}

void NormalizeKernel::load() {
  cudaDeviceProp prop{};
  STOKE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  nvrtcProgram program = nullptr;
  STOKE_NVRTC_CHECK(nvrtcCreateProgram(&program, kNormalizeKernelSource, "stoke_normalize.cu", 0,
                                       nullptr, nullptr));
  const std::string arch =
      "--gpu-architecture=sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 2, options);
  if (compiled != NVRTC_SUCCESS) {
    std::size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    if (size > 1) nvrtcGetProgramLog(program, log.data());
    nvrtcDestroyProgram(&program);
    throw GpuLibraryError(ErrorCode::kNvrtc,
                          "NVRTC could not compile the normalize kernel for " + arch.substr(20) +
                              ": " + nvrtcGetErrorString(compiled) + "\n" + log,
                          static_cast<int>(compiled));
  }
  std::size_t cubin_size = 0;
  STOKE_NVRTC_CHECK(nvrtcGetCUBINSize(program, &cubin_size));
  std::vector<char> cubin(cubin_size);
  STOKE_NVRTC_CHECK(nvrtcGetCUBIN(program, cubin.data()));
  nvrtcDestroyProgram(&program);
  STOKE_CUDA_CHECK(cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr,
                                       nullptr, 0));
  STOKE_CUDA_CHECK(cudaLibraryGetKernel(&kernel_, library_, kNormalizeKernelName));
  blocks_ = prop.multiProcessorCount * 8;
}

void NormalizeKernel::launch(const void* src, float* dst, int samples, int height, int width,
                             int channels, const float* mean, const float* std,
                             cudaStream_t stream) {
  if (channels < 1 || channels > 4) {
    throw InvalidArgument("device normalize supports 1 to 4 channels, not " +
                          std::to_string(channels));
  }
  std::call_once(loaded_, [this] { load(); });
  NormalizeParams params{};
  for (int c = 0; c < channels; ++c) {
    params.scale[c] = 1.0f / (255.0f * std[c]);
    params.shift[c] = -mean[c] / std[c];
  }
  long long pixels = static_cast<long long>(height) * width;
  const long long total = pixels * samples;
  const unsigned int threads = 256;
  const auto blocks = static_cast<unsigned int>(
      std::min<long long>(blocks_, (total + threads - 1) / threads));
  const unsigned char* in = static_cast<const unsigned char*>(src);
  void* args[] = {&in, &dst, &pixels, &samples, &channels, &params};
  STOKE_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(blocks ? blocks : 1),
                                    dim3(threads), args, 0, stream));
}

}  // namespace stoke::cuda
