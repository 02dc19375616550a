#include "backend/cuda/device_normalize.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/jit.hpp"
#include "backend/cuda/kernels.hpp"
#include "backend/cuda/normalize_kernel.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {

NormalizeKernel::~NormalizeKernel() {
  if (library_) STOKE_CUDA_WARN(cudaLibraryUnload(library_));
}

void NormalizeKernel::load() {
  cudaDeviceProp prop{};
  STOKE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  blocks_ = prop.multiProcessorCount * 8;
  // The same kernel source and on-disk JIT cache as the backend's kernels
  // (jit.hpp); the precompiled build when JIT is off or fails.
  if (use_jit_) {
    try {
      const auto& sources = kernel_sources();
      const auto it = std::find_if(sources.begin(), sources.end(),
                                   [](const KernelSource& k) { return k.name == "normalize_u8"; });
      if (it == sources.end()) throw Unsupported("the normalize_u8 kernel source is not embedded");
      const auto cubin =
          JitCache(JitCache::default_directory()).get_or_compile(*it, prop.major * 10 + prop.minor);
      STOKE_CUDA_CHECK(
          cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
      cudaKernel_t kernel = nullptr;
      STOKE_CUDA_CHECK(cudaLibraryGetKernel(&kernel, library_, kNormalizeKernelName));
      function_ = reinterpret_cast<const void*>(kernel);
      return;
    } catch (const Error& e) {
      log_warn(std::string("device normalize: JIT failed, using the precompiled kernel: ") +
               e.what());
    }
  }
  for (const auto& k : precompiled_kernels()) {
    if (std::string(k.name) == kNormalizeKernelName) function_ = k.function;
  }
  if (!function_) throw Unsupported("the precompiled normalize kernel is missing");
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
  const auto blocks =
      static_cast<unsigned int>(std::min<long long>(blocks_, (total + threads - 1) / threads));
  const unsigned char* in = static_cast<const unsigned char*>(src);
  void* args[] = {&in, &dst, &pixels, &samples, &channels, &params};
  cuda::launch(function_, dim3(blocks ? blocks : 1), dim3(threads), args, stream,
               kNormalizeKernelName);
}

}  // namespace stoke::cuda
