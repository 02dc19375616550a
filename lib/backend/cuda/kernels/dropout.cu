// Inverted dropout with the CPU backend's counter-based uniform (splitmix64
// of seed and element index, top 24 bits), so both backends draw the same
// mask for the same seed. Self-contained for NVRTC.

__device__ __forceinline__ float stoke_dropout_uniform(unsigned long long seed,
                                                       unsigned long long index) {
  unsigned long long z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

extern "C" __global__ void stoke_dropout_forward(const float* x, float* y, float* mask, float p,
                                                 float keep_scale, unsigned long long seed,
                                                 long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float m = stoke_dropout_uniform(seed, (unsigned long long)i) >= p ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}
