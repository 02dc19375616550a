// Softmax cross-entropy with accuracy. Per-row work first (probabilities, the
// row's loss and whether its first argmax is the label), then one block sums
// the rows in a fixed order, so loss and correct count are deterministic and
// written to device memory (no host round trip). Self-contained for NVRTC.

// One warp per row. An out-of-range label gives a NaN row loss (the host
// cannot check labels without a synchronization), which makes the mean NaN.
extern "C" __global__ void stoke_softmax_ce_rows(const float* logits, const int* labels,
                                                 float* probs, float* row_loss, float* row_correct,
                                                 int n, int c) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (blockDim.x / 32);
  for (int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < n; r += warps) {
    const float* row = logits + (long long)r * c;
    float* prow = probs + (long long)r * c;
    float best = row[0];
    int arg = 0;
    for (int j = lane; j < c; j += 32) {
      if (row[j] > best || (row[j] == best && j < arg)) {
        best = row[j];
        arg = j;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      const float ob = __shfl_down_sync(0xffffffffu, best, off);
      const int oa = __shfl_down_sync(0xffffffffu, arg, off);
      if (ob > best || (ob == best && oa < arg)) {
        best = ob;
        arg = oa;
      }
    }
    best = __shfl_sync(0xffffffffu, best, 0);
    arg = __shfl_sync(0xffffffffu, arg, 0);
    float sum = 0.0f;
    for (int j = lane; j < c; j += 32) {
      const float e = expf(row[j] - best);
      prow[j] = e;
      sum += e;
    }
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
    sum = __shfl_sync(0xffffffffu, sum, 0);
    const float inv = 1.0f / sum;
    for (int j = lane; j < c; j += 32) prow[j] *= inv;
    if (lane == 0) {
      const int label = labels[r];
      if (label < 0 || label >= c) {
        row_loss[r] = __int_as_float(0x7fc00000);
        row_correct[r] = 0.0f;
      } else {
        row_loss[r] = logf(sum) - (row[label] - best);
        row_correct[r] = arg == label ? 1.0f : 0.0f;
      }
    }
  }
}

// One block of 256 threads: loss[0] = mean of row_loss, correct[0] = sum of row_correct.
extern "C" __global__ void stoke_softmax_ce_reduce(const float* row_loss, const float* row_correct,
                                                   float* loss, float* correct, int n) {
  __shared__ double s_loss[256];
  __shared__ float s_correct[256];
  double l = 0.0;
  float k = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    l += row_loss[i];
    k += row_correct[i];
  }
  s_loss[threadIdx.x] = l;
  s_correct[threadIdx.x] = k;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if ((int)threadIdx.x < s) {
      s_loss[threadIdx.x] += s_loss[threadIdx.x + s];
      s_correct[threadIdx.x] += s_correct[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    loss[0] = n > 0 ? (float)(s_loss[0] / n) : 0.0f;
    correct[0] = s_correct[0];
  }
}

// dlogits = (probs - onehot(label)) / n.
extern "C" __global__ void stoke_softmax_ce_backward(const float* probs, const int* labels,
                                                     float* dlogits, int n, int c) {
  const long long total = (long long)n * c;
  const float inv_n = 1.0f / (float)(n > 0 ? n : 1);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int r = (int)(i / c), j = (int)(i % c);
    dlogits[i] = (probs[i] - (labels[r] == j ? 1.0f : 0.0f)) * inv_n;
  }
}
