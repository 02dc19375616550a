// Segmentation kernels: upsampling (nearest, bilinear as PyTorch's
// align_corners=False), channel concatenation, per-pixel softmax, weighted
// cross-entropy with an ignore label, soft Dice. Sums are taken in a fixed
// order (one block, or one block per class), so results are deterministic.
// Self-contained for NVRTC. A label outside [0, K) that is not the ignore
// label makes the loss NaN (the host cannot check labels without a
// synchronization).

// The source taps of output coordinate `dst` along an axis: in[*i0] * *w0 + in[*i1] * *w1.
__device__ void stoke_axis_taps(long long dst, int in, int out, int mode, int* i0, int* i1,
                                float* w0, float* w1) {
  const float scale = (float)in / (float)out;
  if (mode == 0) {  // nearest
    int s = (int)floorf((float)dst * scale);
    if (s > in - 1) s = in - 1;
    *i0 = *i1 = s;
    *w0 = 1.0f;
    *w1 = 0.0f;
    return;
  }
  float src = ((float)dst + 0.5f) * scale - 0.5f;
  if (src < 0.0f) src = 0.0f;
  *i0 = (int)src;
  *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
  *w1 = src - (float)*i0;
  *w0 = 1.0f - *w1;
}

extern "C" __global__ void stoke_upsample_forward(const float* x, float* y, long long planes, int h,
                                                  int w, int oh, int ow, int mode) {
  const long long total = planes * oh * ow;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long p = i / ((long long)oh * ow);
    const int oy = (int)((i / ow) % oh), ox = (int)(i % ow);
    int y0, y1, x0, x1;
    float wy0, wy1, wx0, wx1;
    stoke_axis_taps(oy, h, oh, mode, &y0, &y1, &wy0, &wy1);
    stoke_axis_taps(ox, w, ow, mode, &x0, &x1, &wx0, &wx1);
    const float* src = x + p * h * w;
    const float top = wx0 * src[y0 * w + x0] + wx1 * src[y0 * w + x1];
    const float bottom = wx0 * src[y1 * w + x0] + wx1 * src[y1 * w + x1];
    y[i] = wy0 * top + wy1 * bottom;
  }
}

// One thread per source row of dx: it alone writes that row, taking the
// output pixels in order (no atomics, the same order as the CPU backend).
extern "C" __global__ void stoke_upsample_backward(const float* dy, float* dx, long long planes,
                                                   int h, int w, int oh, int ow, int mode) {
  const long long rows = planes * h;
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows;
       r += (long long)gridDim.x * blockDim.x) {
    const long long p = r / h;
    const int iy = (int)(r % h);
    float* out = dx + r * w;
    for (int i = 0; i < w; ++i) out[i] = 0.0f;
    const float* g = dy + p * oh * ow;
    for (int oy = 0; oy < oh; ++oy) {
      int y0, y1;
      float wy0, wy1;
      stoke_axis_taps(oy, h, oh, mode, &y0, &y1, &wy0, &wy1);
      if (y0 != iy && y1 != iy) continue;
      for (int ox = 0; ox < ow; ++ox) {
        int x0, x1;
        float wx0, wx1;
        stoke_axis_taps(ox, w, ow, mode, &x0, &x1, &wx0, &wx1);
        const float top = wy0 * g[oy * ow + ox], bottom = wy1 * g[oy * ow + ox];
        if (y0 == iy) {
          out[x0] += wx0 * top;
          out[x1] += wx1 * top;
        }
        if (y1 == iy) {
          out[x0] += wx0 * bottom;
          out[x1] += wx1 * bottom;
        }
      }
    }
  }
}

extern "C" __global__ void stoke_concat_forward(const float* a, const float* b, float* y,
                                                long long n, long long ca, long long cb,
                                                long long plane) {
  const long long c = ca + cb, total = n * c * plane;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long img = i / (c * plane), ch = (i / plane) % c, px = i % plane;
    y[i] = ch < ca ? a[(img * ca + ch) * plane + px] : b[(img * cb + ch - ca) * plane + px];
  }
}

// da or db may be null (not wanted).
extern "C" __global__ void stoke_concat_backward(const float* dy, float* da, float* db, long long n,
                                                 long long ca, long long cb, long long plane) {
  const long long c = ca + cb, total = n * c * plane;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long img = i / (c * plane), ch = (i / plane) % c, px = i % plane;
    if (ch < ca) {
      if (da) da[(img * ca + ch) * plane + px] = dy[i];
    } else if (db) {
      db[(img * cb + ch - ca) * plane + px] = dy[i];
    }
  }
}

// probs = softmax over k channels, one thread per pixel of (n, k, plane).
extern "C" __global__ void stoke_pixel_softmax(const float* logits, float* probs, long long n,
                                               int k, long long plane) {
  const long long pixels = n * plane;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < pixels;
       i += (long long)gridDim.x * blockDim.x) {
    const long long base = (i / plane) * k * plane + i % plane;
    float mx = logits[base];
    for (int c = 1; c < k; ++c) mx = fmaxf(mx, logits[base + c * plane]);
    float sum = 0.0f;
    for (int c = 0; c < k; ++c) {
      const float e = expf(logits[base + c * plane] - mx);
      probs[base + c * plane] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int c = 0; c < k; ++c) probs[base + c * plane] *= inv;
  }
}

// The label of pixel i: -1 when ignored, -2 when out of range.
__device__ int stoke_pixel_label(const int* labels, long long i, int k, int ignore) {
  const int l = labels[i];
  if (l == ignore) return -1;
  return l < 0 || l >= k ? -2 : l;
}

// Per pixel: its weighted loss and weight (NaN for a bad label). The loss is
// -log softmax from the logits (log-sum-exp from the largest), finite where
// the probability underflows to 0.
extern "C" __global__ void stoke_pixel_ce_rows(const float* logits, const int* labels,
                                               const float* weights, float* row_loss,
                                               float* row_weight, long long n, int k,
                                               long long plane, int ignore) {
  const long long pixels = n * plane;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < pixels;
       i += (long long)gridDim.x * blockDim.x) {
    const int l = stoke_pixel_label(labels, i, k, ignore);
    if (l == -2) {
      row_loss[i] = __int_as_float(0x7fc00000);
      row_weight[i] = 0.0f;
    } else if (l < 0) {
      row_loss[i] = 0.0f;
      row_weight[i] = 0.0f;
    } else {
      const float wt = weights ? weights[l] : 1.0f;
      const float* x = logits + (i / plane) * k * plane + i % plane;
      float mx = x[0];
      for (int c = 1; c < k; ++c) mx = fmaxf(mx, x[c * plane]);
      float sum = 0.0f;
      for (int c = 0; c < k; ++c) sum += expf(x[c * plane] - mx);
      row_loss[i] = wt * (mx + logf(sum) - x[l * plane]);
      row_weight[i] = wt;
    }
  }
}

// One block of 256 threads: loss[0] = sum(row_loss) / W, loss[1] = W = sum(row_weight).
extern "C" __global__ void stoke_pixel_ce_reduce(const float* row_loss, const float* row_weight,
                                                 float* loss, long long pixels) {
  __shared__ double s_loss[256];
  __shared__ double s_weight[256];
  double l = 0.0, wt = 0.0;
  for (long long i = threadIdx.x; i < pixels; i += blockDim.x) {
    l += row_loss[i];
    wt += row_weight[i];
  }
  s_loss[threadIdx.x] = l;
  s_weight[threadIdx.x] = wt;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if ((int)threadIdx.x < s) {
      s_loss[threadIdx.x] += s_loss[threadIdx.x + s];
      s_weight[threadIdx.x] += s_weight[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    loss[0] = s_weight[0] > 0.0 ? (float)(s_loss[0] / s_weight[0]) : 0.0f;
    loss[1] = (float)s_weight[0];
  }
}

extern "C" __global__ void stoke_pixel_ce_backward(const float* probs, const int* labels,
                                                   const float* weights, const float* loss,
                                                   float* dlogits, long long n, int k,
                                                   long long plane, int ignore) {
  const long long total = n * k * plane;
  const float w_total = loss[1];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long img = i / (k * plane), px = i % plane;
    const int c = (int)((i / plane) % k);
    const int l = stoke_pixel_label(labels, img * plane + px, k, ignore);
    const float scale = l < 0 || !(w_total > 0.0f) ? 0.0f : (weights ? weights[l] : 1.0f) / w_total;
    dlogits[i] = scale * (probs[i] - (c == l ? 1.0f : 0.0f));
  }
}

// One block of 256 threads per class c: sums[c] = {I, P, G} over the pixels
// not ignored (NaN when a label is out of range).
extern "C" __global__ void stoke_dice_sums(const float* probs, const int* labels, float* sums,
                                           long long n, int k, long long plane, int ignore) {
  __shared__ double s[3][256];
  const int c = blockIdx.x;
  double inter = 0.0, p_sum = 0.0, g_sum = 0.0;
  for (long long i = threadIdx.x; i < n * plane; i += blockDim.x) {
    const int l = stoke_pixel_label(labels, i, k, ignore);
    if (l == -1) continue;
    if (l == -2) {
      inter = __int_as_float(0x7fc00000);
      continue;
    }
    const float p = probs[(i / plane) * k * plane + c * plane + i % plane];
    p_sum += p;
    if (l == c) {
      inter += p;
      g_sum += 1.0;
    }
  }
  s[0][threadIdx.x] = inter;
  s[1][threadIdx.x] = p_sum;
  s[2][threadIdx.x] = g_sum;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if ((int)threadIdx.x < step)
      for (int j = 0; j < 3; ++j) s[j][threadIdx.x] += s[j][threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x < 3) sums[c * 3 + threadIdx.x] = (float)s[threadIdx.x][0];
}

// One thread: loss[0] = mean over classes of (1 - dice), 0 for a class absent from the labels.
extern "C" __global__ void stoke_dice_loss(const float* sums, float* loss, int k, float smooth) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double total = 0.0;
  for (int c = 0; c < k; ++c) {
    const double inter = sums[c * 3], p_sum = sums[c * 3 + 1], g_sum = sums[c * 3 + 2];
    double den = p_sum + g_sum + smooth;
    if (den < 1e-7) den = 1e-7;
    if (g_sum > 0.0 || inter != inter) total += 1.0 - (2.0 * inter + smooth) / den;
  }
  loss[0] = (float)(total / k);
}

// One thread per pixel: d loss / d p per class, then through the softmax.
extern "C" __global__ void stoke_dice_backward(const float* probs, const int* labels,
                                               const float* sums, float* dlogits, long long n,
                                               int k, long long plane, int ignore, float smooth) {
  const long long pixels = n * plane;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < pixels;
       i += (long long)gridDim.x * blockDim.x) {
    const long long base = (i / plane) * k * plane + i % plane;
    const int l = stoke_pixel_label(labels, i, k, ignore);
    float dot = 0.0f;
    for (int c = 0; c < k; ++c) {
      const float g_sum = sums[c * 3 + 2];
      const float den = sums[c * 3 + 1] + g_sum + smooth, num = 2.0f * sums[c * 3] + smooth;
      float dp = 0.0f;
      if (l >= 0 && g_sum > 0.0f && den > 1e-7f)
        dp = (c == l ? num - 2.0f * den : num) / (den * den) / (float)k;
      dlogits[base + c * plane] = dp;
      dot += probs[base + c * plane] * dp;
    }
    for (int c = 0; c < k; ++c)
      dlogits[base + c * plane] = probs[base + c * plane] * (dlogits[base + c * plane] - dot);
  }
}
