// Device-side input conversion for the prefetcher: uint8 HWC images uploaded
// as they come from the pipeline (4x fewer bytes than float) and turned into
// normalized float CHW on the device. Self-contained for NVRTC.

// Per-channel affine map: out = in * scale[c] + shift[c], where
// scale = 1 / (255 * std) and shift = -mean / std (mean, std on [0, 1]).
struct StokeNormalizeParams {
  float scale[4];
  float shift[4];
};

// One thread per (sample, pixel); it reads the pixel's channels (contiguous
// in HWC) and writes one float per channel plane, so writes are coalesced
// across the warp within each plane.
extern "C" __global__ void stoke_u8_hwc_to_f32_chw(const unsigned char* __restrict__ src,
                                                   float* __restrict__ dst,
                                                   long long pixels_per_sample, int samples,
                                                   int channels, StokeNormalizeParams params) {
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
