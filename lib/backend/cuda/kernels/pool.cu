// Pooling kernels of the CUDA backend, with the CPU backend's semantics:
// max pooling sends the gradient to the first maximum of each window
// (row-major), average pooling divides by the full window (padding counts),
// padded positions are skipped. Backward kernels gather per input element
// (no atomics), so results are deterministic. Self-contained for NVRTC.

#define STOKE_GRID_STRIDE(i, n)                                                 \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
       i += (long long)gridDim.x * blockDim.x)

struct StokePoolGeom {
  int h, w, p, q;  // input and output plane sizes
  int kh, kw, sh, sw, ph, pw;
};

// Offset (within the plane) of the first maximum of output (op, oq)'s window.
__device__ __forceinline__ int stoke_pool_argmax(const float* plane, const StokePoolGeom& g, int op,
                                                 int oq) {
  float best = -__int_as_float(0x7f800000);
  int arg = -1;
  for (int r = 0; r < g.kh; ++r) {
    const int ih = op * g.sh - g.ph + r;
    if (ih < 0 || ih >= g.h) continue;
    for (int s = 0; s < g.kw; ++s) {
      const int iw = oq * g.sw - g.pw + s;
      if (iw < 0 || iw >= g.w) continue;
      const float v = plane[ih * g.w + iw];
      if (arg < 0 || v > best) {
        best = v;
        arg = ih * g.w + iw;
      }
    }
  }
  return arg;
}

extern "C" __global__ void stoke_max_pool_forward(const float* x, float* y, StokePoolGeom g,
                                                  long long total) {
  STOKE_GRID_STRIDE(o, total) {
    const long long plane = o / ((long long)g.p * g.q);
    const int rem = (int)(o % ((long long)g.p * g.q));
    const float* in = x + plane * g.h * g.w;
    const int arg = stoke_pool_argmax(in, g, rem / g.q, rem % g.q);
    y[o] = arg >= 0 ? in[arg] : -__int_as_float(0x7f800000);
  }
}

// Output rows/cols whose window covers input coordinate i (inclusive range).
__device__ __forceinline__ void stoke_pool_cover(int i, int k, int s, int pad, int out, int* lo,
                                                 int* hi) {
  // o*s - pad <= i <= o*s - pad + k - 1
  const int a = i + pad - k + 1;
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  int h = (i + pad) / s;
  *hi = h < out - 1 ? h : out - 1;
}

extern "C" __global__ void stoke_max_pool_backward(const float* x, const float* dy, float* dx,
                                                   StokePoolGeom g, long long total) {
  STOKE_GRID_STRIDE(i, total) {
    const long long plane = i / ((long long)g.h * g.w);
    const int pos = (int)(i % ((long long)g.h * g.w));
    const int ih = pos / g.w, iw = pos % g.w;
    const float* in = x + plane * g.h * g.w;
    const float* grad = dy + plane * g.p * g.q;
    int p0, p1, q0, q1;
    stoke_pool_cover(ih, g.kh, g.sh, g.ph, g.p, &p0, &p1);
    stoke_pool_cover(iw, g.kw, g.sw, g.pw, g.q, &q0, &q1);
    float sum = 0.0f;
    for (int op = p0; op <= p1; ++op)
      for (int oq = q0; oq <= q1; ++oq)
        if (stoke_pool_argmax(in, g, op, oq) == pos) sum += grad[op * g.q + oq];
    dx[i] = sum;
  }
}

extern "C" __global__ void stoke_avg_pool_forward(const float* x, float* y, StokePoolGeom g,
                                                  long long total) {
  STOKE_GRID_STRIDE(o, total) {
    const long long plane = o / ((long long)g.p * g.q);
    const int rem = (int)(o % ((long long)g.p * g.q));
    const int op = rem / g.q, oq = rem % g.q;
    const float* in = x + plane * g.h * g.w;
    float sum = 0.0f;
    for (int r = 0; r < g.kh; ++r) {
      const int ih = op * g.sh - g.ph + r;
      if (ih < 0 || ih >= g.h) continue;
      for (int s = 0; s < g.kw; ++s) {
        const int iw = oq * g.sw - g.pw + s;
        if (iw >= 0 && iw < g.w) sum += in[ih * g.w + iw];
      }
    }
    y[o] = sum / (float)(g.kh * g.kw);
  }
}

extern "C" __global__ void stoke_avg_pool_backward(const float* dy, float* dx, StokePoolGeom g,
                                                   long long total) {
  STOKE_GRID_STRIDE(i, total) {
    const long long plane = i / ((long long)g.h * g.w);
    const int pos = (int)(i % ((long long)g.h * g.w));
    const float* grad = dy + plane * g.p * g.q;
    int p0, p1, q0, q1;
    stoke_pool_cover(pos / g.w, g.kh, g.sh, g.ph, g.p, &p0, &p1);
    stoke_pool_cover(pos % g.w, g.kw, g.sw, g.pw, g.q, &q0, &q1);
    float sum = 0.0f;
    for (int op = p0; op <= p1; ++op)
      for (int oq = q0; oq <= q1; ++oq) sum += grad[op * g.q + oq];
    dx[i] = sum / (float)(g.kh * g.kw);
  }
}

// One warp per (n, c) plane: y[plane] = mean of its hw elements.
extern "C" __global__ void stoke_global_avg_pool_forward(const float* x, float* y, long long planes,
                                                         int hw) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long pl = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32; pl < planes;
       pl += warps) {
    const float* in = x + pl * hw;
    float sum = 0.0f;
    for (int i = lane; i < hw; i += 32) sum += in[i];
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
    if (lane == 0) y[pl] = sum / (float)hw;
  }
}

extern "C" __global__ void stoke_global_avg_pool_backward(const float* dy, float* dx,
                                                          long long total, int hw) {
  STOKE_GRID_STRIDE(i, total) {
    dx[i] = dy[i / hw] / (float)hw;
  }
}
