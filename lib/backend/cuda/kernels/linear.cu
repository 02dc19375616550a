// Bias helpers of the cuBLAS linear layer and fills. Self-contained for NVRTC.

// y (rows, cols) += bias (cols), broadcast over rows.
extern "C" __global__ void stoke_add_bias_rows(float* y, const float* bias, long long rows,
                                               int cols) {
  const long long total = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] += bias[i % cols];
  }
}

// db (cols) = sum over rows of dy (rows, cols): one thread per column, rows
// summed in order (deterministic; coalesced across the columns of a row).
extern "C" __global__ void stoke_sum_rows(const float* dy, float* db, long long rows, int cols) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (long long r = 0; r < rows; ++r) sum += dy[r * cols + j];
    db[j] = sum;
  }
}

extern "C" __global__ void stoke_fill(float* y, float value, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = value;
  }
}

// Up to four per-step values written in stream order; they travel as kernel
// parameters, so the host's copy can go away at once (Backend::write_values).
extern "C" __global__ void stoke_write_values(float* y, int count, float v0, float v1, float v2,
                                              float v3) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const float v[4] = {v0, v1, v2, v3};
    for (int i = 0; i < count; ++i) y[i] = v[i];
  }
}

// y = a * b elementwise (dropout backward: dx = dy * mask).
extern "C" __global__ void stoke_mul(const float* a, const float* b, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = a[i] * b[i];
  }
}
