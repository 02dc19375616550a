// Elementwise kernels of the CUDA backend. Self-contained (no headers) so that
// NVRTC compiles this file at run time for the exact device, and nvcc
// precompiles the same text for STOKE_CUDA_ARCHITECTURES.
// Every kernel is a grid-stride loop over n elements.

extern "C" __global__ void stoke_relu_forward(const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

// dx = dy where the forward input was positive.
extern "C" __global__ void stoke_relu_backward(const float* x, const float* dy, float* dx,
                                               long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
  }
}

// y = a + b (the residual add).
extern "C" __global__ void stoke_add(const float* a, const float* b, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = a[i] + b[i];
  }
}

// y = max(a + b, 0) (a residual block's end); y may be a or b.
extern "C" __global__ void stoke_add_relu(const float* a, const float* b, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = a[i] + b[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

// x *= alpha in place.
extern "C" __global__ void stoke_scale(float* x, float alpha, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    x[i] *= alpha;
  }
}

// y += alpha * x (gradient accumulation).
extern "C" __global__ void stoke_axpy(float alpha, const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] += alpha * x[i];
  }
}

// flag (set to 1 before) = 0 when any element is NaN or infinite: its
// exponent bits all ones.
extern "C" __global__ void stoke_all_finite(const float* x, float* flag, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) *flag = 0.0f;
  }
}

// float -> bfloat16 bits, rounded to nearest even (a NaN stays a quiet NaN):
// the mixed-precision convolutions' operands (conv2d_bf16.cpp).
extern "C" __global__ void stoke_to_bf16(const float* x, unsigned short* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const unsigned int u = __float_as_uint(x[i]);
    y[i] = (u & 0x7fffffffu) > 0x7f800000u
               ? (unsigned short)((u >> 16) | 0x40u)
               : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

// bfloat16 bits -> float (exact).
extern "C" __global__ void stoke_from_bf16(const unsigned short* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = __uint_as_float(((unsigned int)x[i]) << 16);
  }
}

// float -> IEEE half bits, rounded to nearest even (PTX cvt.rn: no header
// needed): the fp16 training convolutions' operands.
extern "C" __global__ void stoke_to_f16(const float* x, unsigned short* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x[i]));
    y[i] = h;
  }
}

// IEEE half bits -> float (exact).
extern "C" __global__ void stoke_from_f16(const unsigned short* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x[i]));
    y[i] = f;
  }
}
