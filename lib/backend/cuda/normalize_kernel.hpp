// Device-side input conversion for the prefetcher: uint8 HWC images uploaded
// as they come from the pipeline (4x fewer bytes than float) and turned into
// normalized float CHW on the device. The source is compiled at run time with
// NVRTC for the exact device (STOKE_GPU_JIT); the unit tests compile it for
// every supported architecture. Plain C++ header: no CUDA include needed.
#pragma once

namespace stoke::cuda {

inline constexpr const char* kNormalizeKernelName = "stoke_u8_hwc_to_f32_chw";

// Per-channel affine map: out = in * scale[c] + shift[c], where
// scale = 1 / (255 * std) and shift = -mean / std (mean, std on [0, 1]).
struct NormalizeParams {
  float scale[4];
  float shift[4];
};

// One thread per (sample, pixel); it reads the pixel's channels (contiguous
// in HWC) and writes one float per channel plane, so writes are coalesced
// across the warp within each plane.
inline constexpr const char* kNormalizeKernelSource = R"CUDA(
struct NormalizeParams {
  float scale[4];
  float shift[4];
};

extern "C" __global__ void stoke_u8_hwc_to_f32_chw(const unsigned char* __restrict__ src,
                                                   float* __restrict__ dst,
                                                   long long pixels_per_sample, int samples,
                                                   int channels, NormalizeParams params) {
  const long long total = pixels_per_sample * samples;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long n = i / pixels_per_sample;
    const long long p = i - n * pixels_per_sample;
    const unsigned char* in = src + i * channels;
    float* out = dst + n * pixels_per_sample * channels + p;
    for (int c = 0; c < channels; ++c) {
      out[c * pixels_per_sample] = (float)in[c] * params.scale[c] + params.shift[c];
    }
  }
}
)CUDA";

}  // namespace stoke::cuda
