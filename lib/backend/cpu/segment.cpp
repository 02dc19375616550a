// Segmentation ops on the CPU: upsampling with per-axis tap tables, channel
// concatenation as plane copies, and the per-pixel losses over pixel chunks.
// Sums are taken per chunk of a fixed split (kChunks, not one per thread) and
// reduced in chunk order, so the results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

constexpr int kChunks = 8;

int chunk_count(std::int64_t items) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(kChunks, items)));
}

// The source taps of every output coordinate along one axis: out[i] reads
// in[lo[i]] * w_lo[i] + in[hi[i]] * w_hi[i] (nearest: hi = lo, w_hi = 0).
struct AxisTaps {
  std::vector<std::int64_t> lo, hi;
  std::vector<float> w_lo, w_hi;
};

AxisTaps axis_taps(std::int64_t in, std::int64_t out, UpsampleMode mode) {
  AxisTaps t;
  t.lo.resize(static_cast<std::size_t>(out));
  t.hi.resize(t.lo.size());
  t.w_lo.resize(t.lo.size());
  t.w_hi.resize(t.lo.size());
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (std::size_t i = 0; i < t.lo.size(); ++i) {
    if (mode == UpsampleMode::kNearest) {
      const auto src = static_cast<std::int64_t>(std::floor(static_cast<float>(i) * scale));
      t.lo[i] = t.hi[i] = std::min(src, in - 1);
      t.w_lo[i] = 1.0f;
      t.w_hi[i] = 0.0f;
      continue;
    }
    const float src = std::max(0.0f, (static_cast<float>(i) + 0.5f) * scale - 0.5f);
    t.lo[i] = static_cast<std::int64_t>(src);
    t.hi[i] = t.lo[i] + (t.lo[i] < in - 1 ? 1 : 0);
    t.w_hi[i] = src - static_cast<float>(t.lo[i]);
    t.w_lo[i] = 1.0f - t.w_hi[i];
  }
  return t;
}

std::int32_t checked_label(const std::int32_t* labels, std::int64_t i, std::int64_t classes,
                           const PixelLossParams& p) {
  const std::int32_t l = labels[i];
  if (l == p.ignore_label) return -1;
  if (l < 0 || l >= classes) {
    throw InvalidArgument("pixel loss: label " + std::to_string(l) + " of pixel " +
                          std::to_string(i) + " is outside [0, " + std::to_string(classes) +
                          ") and is not the ignore label " + std::to_string(p.ignore_label));
  }
  return l;
}

// probs for pixels [b, e) of image `n` (plane pixels, k channels).
void softmax_pixels(const float* logits, float* probs, std::int64_t k, std::int64_t plane,
                    std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) {
    float mx = logits[i];
    for (std::int64_t c = 1; c < k; ++c) mx = std::max(mx, logits[c * plane + i]);
    double sum = 0;
    for (std::int64_t c = 0; c < k; ++c) {
      const float v = std::exp(logits[c * plane + i] - mx);
      probs[c * plane + i] = v;
      sum += v;
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (std::int64_t c = 0; c < k; ++c) probs[c * plane + i] *= inv;
  }
}

// log(sum_c exp(logits[c])) of pixel i, in double from the largest logit:
// -log p[label] = lse - logits[label] stays finite where the fp32 probability
// underflows to 0 (a logit gap above ~88), as PyTorch's log-softmax does.
double log_sum_exp(const float* logits, std::int64_t k, std::int64_t plane, std::int64_t i) {
  float mx = logits[i];
  for (std::int64_t c = 1; c < k; ++c) mx = std::max(mx, logits[c * plane + i]);
  double sum = 0;
  for (std::int64_t c = 0; c < k; ++c)
    sum += std::exp(static_cast<double>(logits[c * plane + i]) - mx);
  return mx + std::log(sum);
}

// Runs body(n, pixel_begin, pixel_end, chunk) over every image's pixels in
// a fixed split of the batch's pixels.
template <class Body>
void over_pixels(const CpuBackend& be, std::int64_t images, std::int64_t plane, int chunks,
                 Body&& body) {
  const std::int64_t total = images * plane;
  for_chunks(be, static_cast<std::size_t>(total), chunks,
             [&](int chunk, std::size_t begin, std::size_t end) {
               for (auto p = static_cast<std::int64_t>(begin);
                    p < static_cast<std::int64_t>(end);) {
                 const std::int64_t n = p / plane, i = p % plane;
                 const std::int64_t stop = std::min<std::int64_t>(plane, i + (end - p));
                 body(n, i, stop, chunk);
                 p += stop - i;
               }
             });
}

}  // namespace

void CpuBackend::do_upsample2d_forward(const Tensor& x, Tensor& y, UpsampleMode mode) {
  const std::int64_t h = x.dim(2), w = x.dim(3), oh = y.dim(2), ow = y.dim(3);
  const AxisTaps ty = axis_taps(h, oh, mode), tx = axis_taps(w, ow, mode);
  const std::int64_t planes = x.dim(0) * x.dim(1);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for_chunks(*this, static_cast<std::size_t>(planes), chunks(),
             [&](int, std::size_t b, std::size_t e) {
               for (std::size_t p = b; p < e; ++p) {
                 const float* src = xp + static_cast<std::int64_t>(p) * h * w;
                 float* dst = yp + static_cast<std::int64_t>(p) * oh * ow;
                 for (std::int64_t oy = 0; oy < oh; ++oy) {
                   const auto r = static_cast<std::size_t>(oy);
                   const float* row0 = src + ty.lo[r] * w;
                   const float* row1 = src + ty.hi[r] * w;
                   for (std::int64_t ox = 0; ox < ow; ++ox) {
                     const auto c = static_cast<std::size_t>(ox);
                     const float top = tx.w_lo[c] * row0[tx.lo[c]] + tx.w_hi[c] * row0[tx.hi[c]];
                     const float bottom = tx.w_lo[c] * row1[tx.lo[c]] + tx.w_hi[c] * row1[tx.hi[c]];
                     dst[oy * ow + ox] = ty.w_lo[r] * top + ty.w_hi[r] * bottom;
                   }
                 }
               }
             });
}

void CpuBackend::do_upsample2d_backward(const Tensor& dy, Tensor& dx, UpsampleMode mode) {
  const std::int64_t h = dx.dim(2), w = dx.dim(3), oh = dy.dim(2), ow = dy.dim(3);
  const AxisTaps ty = axis_taps(h, oh, mode), tx = axis_taps(w, ow, mode);
  const std::int64_t planes = dx.dim(0) * dx.dim(1);
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  // A plane's source pixels are written by its own chunk only, in output order.
  for_chunks(*this, static_cast<std::size_t>(planes), chunks(),
             [&](int, std::size_t b, std::size_t e) {
               for (std::size_t p = b; p < e; ++p) {
                 const float* g = dyp + static_cast<std::int64_t>(p) * oh * ow;
                 float* dst = dxp + static_cast<std::int64_t>(p) * h * w;
                 std::fill(dst, dst + h * w, 0.0f);
                 for (std::int64_t oy = 0; oy < oh; ++oy) {
                   const auto r = static_cast<std::size_t>(oy);
                   float* row0 = dst + ty.lo[r] * w;
                   float* row1 = dst + ty.hi[r] * w;
                   for (std::int64_t ox = 0; ox < ow; ++ox) {
                     const auto c = static_cast<std::size_t>(ox);
                     const float top = ty.w_lo[r] * g[oy * ow + ox];
                     const float bottom = ty.w_hi[r] * g[oy * ow + ox];
                     row0[tx.lo[c]] += tx.w_lo[c] * top;
                     row0[tx.hi[c]] += tx.w_hi[c] * top;
                     row1[tx.lo[c]] += tx.w_lo[c] * bottom;
                     row1[tx.hi[c]] += tx.w_hi[c] * bottom;
                   }
                 }
               }
             });
}

void CpuBackend::do_concat_channels_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  const std::int64_t plane = a.dim(2) * a.dim(3), ca = a.dim(1), cb = b.dim(1);
  const std::size_t a_bytes = static_cast<std::size_t>(ca * plane) * sizeof(float);
  const std::size_t b_bytes = static_cast<std::size_t>(cb * plane) * sizeof(float);
  for_chunks(*this, static_cast<std::size_t>(a.dim(0)), chunks(),
             [&](int, std::size_t begin, std::size_t end) {
               for (auto n = static_cast<std::int64_t>(begin); n < static_cast<std::int64_t>(end);
                    ++n) {
                 float* out = y.data<float>() + n * (ca + cb) * plane;
                 std::memcpy(out, a.data<float>() + n * ca * plane, a_bytes);
                 std::memcpy(out + ca * plane, b.data<float>() + n * cb * plane, b_bytes);
               }
             });
}

void CpuBackend::do_concat_channels_backward(const Tensor& dy, Tensor& da, Tensor& db) {
  const std::int64_t plane = dy.dim(2) * dy.dim(3), c = dy.dim(1);
  const std::int64_t ca = da.defined() ? da.dim(1) : c - db.dim(1), cb = c - ca;
  for_chunks(*this, static_cast<std::size_t>(dy.dim(0)), chunks(),
             [&](int, std::size_t begin, std::size_t end) {
               for (auto n = static_cast<std::int64_t>(begin); n < static_cast<std::int64_t>(end);
                    ++n) {
                 const float* in = dy.data<float>() + n * c * plane;
                 if (da.defined())
                   std::memcpy(da.data<float>() + n * ca * plane, in,
                               static_cast<std::size_t>(ca * plane) * sizeof(float));
                 if (db.defined())
                   std::memcpy(db.data<float>() + n * cb * plane, in + ca * plane,
                               static_cast<std::size_t>(cb * plane) * sizeof(float));
               }
             });
}

void CpuBackend::do_pixel_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                const Tensor& class_weights, Tensor& probs,
                                                Tensor& loss, const PixelLossParams& params) {
  const std::int64_t n = logits.dim(0), k = logits.dim(1), plane = logits.dim(2) * logits.dim(3);
  const int count = chunk_count(n * plane);
  std::vector<double> total(static_cast<std::size_t>(count), 0.0);
  std::vector<double> weight(total.size(), 0.0);
  const float* cw = class_weights.defined() ? class_weights.data<float>() : nullptr;
  over_pixels(*this, n, plane, count,
              [&](std::int64_t img, std::int64_t b, std::int64_t e, int chunk) {
                const float* l = logits.data<float>() + img * k * plane;
                float* p = probs.data<float>() + img * k * plane;
                softmax_pixels(l, p, k, plane, b, e);
                for (std::int64_t i = b; i < e; ++i) {
                  const std::int32_t label =
                      checked_label(labels.data<std::int32_t>(), img * plane + i, k, params);
                  if (label < 0) continue;
                  const double w = cw ? cw[label] : 1.0;
                  total[static_cast<std::size_t>(chunk)] +=
                      w * (log_sum_exp(l, k, plane, i) - l[label * plane + i]);
                  weight[static_cast<std::size_t>(chunk)] += w;
                }
              });
  double t = 0, w = 0;
  for (std::size_t c = 0; c < total.size(); ++c) t += total[c], w += weight[c];
  loss.data<float>()[0] = w > 0 ? static_cast<float>(t / w) : 0.0f;
  loss.data<float>()[1] = static_cast<float>(w);
}

void CpuBackend::do_pixel_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                 const Tensor& class_weights, const Tensor& loss,
                                                 Tensor& dlogits, const PixelLossParams& params) {
  const std::int64_t n = probs.dim(0), k = probs.dim(1), plane = probs.dim(2) * probs.dim(3);
  const float total_weight = loss.data<float>()[1];
  const float* cw = class_weights.defined() ? class_weights.data<float>() : nullptr;
  over_pixels(*this, n, plane, chunk_count(n * plane),
              [&](std::int64_t img, std::int64_t b, std::int64_t e, int) {
                const float* p = probs.data<float>() + img * k * plane;
                float* d = dlogits.data<float>() + img * k * plane;
                for (std::int64_t i = b; i < e; ++i) {
                  const std::int32_t label =
                      checked_label(labels.data<std::int32_t>(), img * plane + i, k, params);
                  const float scale = label < 0 || !(total_weight > 0)
                                          ? 0.0f
                                          : (cw ? cw[label] : 1.0f) / total_weight;
                  for (std::int64_t c = 0; c < k; ++c)
                    d[c * plane + i] = scale * (p[c * plane + i] - (c == label ? 1.0f : 0.0f));
                }
              });
}

void CpuBackend::do_dice_loss_forward(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                      Tensor& sums, Tensor& loss, const PixelLossParams& params) {
  const std::int64_t n = logits.dim(0), k = logits.dim(1), plane = logits.dim(2) * logits.dim(3);
  const int count = chunk_count(n * plane);
  // Per chunk: k x {I, P, G}.
  std::vector<double> part(static_cast<std::size_t>(count * k * 3), 0.0);
  over_pixels(*this, n, plane, count,
              [&](std::int64_t img, std::int64_t b, std::int64_t e, int chunk) {
                const float* l = logits.data<float>() + img * k * plane;
                float* p = probs.data<float>() + img * k * plane;
                softmax_pixels(l, p, k, plane, b, e);
                double* s = part.data() + static_cast<std::size_t>(chunk * k * 3);
                for (std::int64_t i = b; i < e; ++i) {
                  const std::int32_t label =
                      checked_label(labels.data<std::int32_t>(), img * plane + i, k, params);
                  if (label < 0) continue;
                  for (std::int64_t c = 0; c < k; ++c) s[c * 3 + 1] += p[c * plane + i];
                  s[label * 3 + 0] += p[label * plane + i];
                  s[label * 3 + 2] += 1.0;
                }
              });
  double total = 0;
  for (std::int64_t c = 0; c < k; ++c) {
    double v[3] = {0, 0, 0};
    for (int chunk = 0; chunk < count; ++chunk)
      for (int j = 0; j < 3; ++j) v[j] += part[static_cast<std::size_t>((chunk * k + c) * 3 + j)];
    for (int j = 0; j < 3; ++j) sums.data<float>()[c * 3 + j] = static_cast<float>(v[j]);
    if (v[2] > 0)
      total += 1.0 - (2 * v[0] + params.smooth) / std::max(v[1] + v[2] + params.smooth, 1e-7);
  }
  loss.data<float>()[0] = static_cast<float>(total / static_cast<double>(k));
}

void CpuBackend::do_dice_loss_backward(const Tensor& probs, const Tensor& labels,
                                       const Tensor& sums, Tensor& dlogits,
                                       const PixelLossParams& params) {
  const std::int64_t n = probs.dim(0), k = probs.dim(1), plane = probs.dim(2) * probs.dim(3);
  // d loss / d p_c at a pixel labelled y: (num_c - 2 den_c [y == c]) / (k den_c^2),
  // so two values per class: a and b = a - 2 / (k den_c).
  std::vector<float> absent(static_cast<std::size_t>(k)), present(static_cast<std::size_t>(k));
  for (std::int64_t c = 0; c < k; ++c) {
    const double inter = sums.data<float>()[c * 3], g = sums.data<float>()[c * 3 + 2];
    const double den = sums.data<float>()[c * 3 + 1] + g + params.smooth;
    const double num = 2 * inter + params.smooth;
    const bool counts = g > 0 && den > 1e-7;
    const auto kd = static_cast<double>(k);
    absent[static_cast<std::size_t>(c)] =
        counts ? static_cast<float>(num / (den * den) / kd) : 0.0f;
    present[static_cast<std::size_t>(c)] =
        counts ? static_cast<float>((num - 2 * den) / (den * den) / kd) : 0.0f;
  }
  over_pixels(*this, n, plane, chunk_count(n * plane),
              [&](std::int64_t img, std::int64_t b, std::int64_t e, int) {
                const float* p = probs.data<float>() + img * k * plane;
                float* d = dlogits.data<float>() + img * k * plane;
                for (std::int64_t i = b; i < e; ++i) {
                  const std::int32_t label =
                      checked_label(labels.data<std::int32_t>(), img * plane + i, k, params);
                  if (label < 0) {
                    for (std::int64_t c = 0; c < k; ++c) d[c * plane + i] = 0.0f;
                    continue;
                  }
                  float dot = 0.0f;
                  for (std::int64_t c = 0; c < k; ++c) {
                    const auto cc = static_cast<std::size_t>(c);
                    const float dp = c == label ? present[cc] : absent[cc];
                    d[c * plane + i] = dp;  // d loss / d p, then through the softmax below
                    dot += p[c * plane + i] * dp;
                  }
                  for (std::int64_t c = 0; c < k; ++c)
                    d[c * plane + i] = p[c * plane + i] * (d[c * plane + i] - dot);
                }
              });
}

}  // namespace stoke::cpu
