// Device-side input conversion: uint8 HWC batches (4x fewer bytes over PCIe
// than float) to normalized float CHW, (x - mean[c]) * inv_std[c].
// Self-contained for NVRTC.

// src: (N, H, W, C) uint8; dst: (N, C, H, W) float. One thread per output element.
extern "C" __global__ void stoke_normalize_u8_hwc_to_chw(const unsigned char* src, float* dst,
                                                         int n, int h, int w, int c,
                                                         const float* mean, const float* inv_std) {
  const long long plane = (long long)h * w;
  const long long total = (long long)n * c * plane;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long pixel = i % plane;
    const int channel = (int)((i / plane) % c);
    const long long image = i / (plane * c);
    const unsigned char v = src[(image * plane + pixel) * c + channel];
    dst[i] = ((float)v - mean[channel]) * inv_std[channel];
  }
}
