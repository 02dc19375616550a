// Segmentation ops' references (upsampling, channel concatenation, the
// per-pixel losses), in double, one output element at a time.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu::naive {

namespace {

// One output coordinate's source taps along an axis of `in` pixels, `out`
// long: (index, weight) pairs, as PyTorch computes them in float.
struct Taps {
  std::int64_t i0 = 0, i1 = 0;
  double w0 = 1, w1 = 0;
};

Taps taps(std::int64_t dst, std::int64_t in, std::int64_t out, UpsampleMode mode) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  Taps t;
  if (mode == UpsampleMode::kNearest) {
    t.i0 = t.i1 =
        std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(dst) * scale)), in - 1);
    return t;
  }
  const float src = std::max(0.0f, (static_cast<float>(dst) + 0.5f) * scale - 0.5f);
  t.i0 = static_cast<std::int64_t>(src);
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  const float lambda1 = src - static_cast<float>(t.i0);
  t.w1 = lambda1;
  t.w0 = 1.0f - lambda1;
  return t;
}

float& at(Tensor& t, std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t x) {
  return t.data<float>()[((n * t.dim(1) + c) * t.dim(2) + y) * t.dim(3) + x];
}
float at(const Tensor& t, std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t x) {
  return t.data<float>()[((n * t.dim(1) + c) * t.dim(2) + y) * t.dim(3) + x];
}

// The label of pixel (n, y, x); -1 when ignored. InvalidArgument outside [0, k).
std::int64_t label_at(const Tensor& labels, std::int64_t i, std::int64_t k,
                      const PixelLossParams& p) {
  const std::int32_t l = labels.data<std::int32_t>()[i];
  if (l == p.ignore_label) return -1;
  if (l < 0 || l >= k)
    throw InvalidArgument("pixel loss: label " + std::to_string(l) + " of pixel " +
                          std::to_string(i) + " is outside [0, " + std::to_string(k) + ")");
  return l;
}

// probs = softmax over channels per pixel.
void softmax_pixels(const Tensor& logits, Tensor& probs) {
  const std::int64_t n = logits.dim(0), k = logits.dim(1), plane = logits.dim(2) * logits.dim(3);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < plane; ++i) {
      const float* l = logits.data<float>() + b * k * plane + i;
      double mx = l[0];
      for (std::int64_t c = 1; c < k; ++c) mx = std::max(mx, static_cast<double>(l[c * plane]));
      double sum = 0;
      for (std::int64_t c = 0; c < k; ++c) sum += std::exp(l[c * plane] - mx);
      for (std::int64_t c = 0; c < k; ++c)
        probs.data<float>()[(b * k + c) * plane + i] =
            static_cast<float>(std::exp(l[c * plane] - mx) / sum);
    }
}

}  // namespace

void upsample2d_forward(const Tensor& x, Tensor& y, UpsampleMode mode) {
  for (std::int64_t n = 0; n < y.dim(0); ++n)
    for (std::int64_t c = 0; c < y.dim(1); ++c)
      for (std::int64_t oy = 0; oy < y.dim(2); ++oy)
        for (std::int64_t ox = 0; ox < y.dim(3); ++ox) {
          const Taps ty = taps(oy, x.dim(2), y.dim(2), mode);
          const Taps tx = taps(ox, x.dim(3), y.dim(3), mode);
          const double v =
              ty.w0 * (tx.w0 * at(x, n, c, ty.i0, tx.i0) + tx.w1 * at(x, n, c, ty.i0, tx.i1)) +
              ty.w1 * (tx.w0 * at(x, n, c, ty.i1, tx.i0) + tx.w1 * at(x, n, c, ty.i1, tx.i1));
          at(y, n, c, oy, ox) = static_cast<float>(v);
        }
}

void upsample2d_backward(const Tensor& dy, Tensor& dx, UpsampleMode mode) {
  std::vector<double> acc(static_cast<std::size_t>(dx.numel()), 0.0);
  const auto index = [&](std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t x) {
    return static_cast<std::size_t>(((n * dx.dim(1) + c) * dx.dim(2) + y) * dx.dim(3) + x);
  };
  for (std::int64_t n = 0; n < dy.dim(0); ++n)
    for (std::int64_t c = 0; c < dy.dim(1); ++c)
      for (std::int64_t oy = 0; oy < dy.dim(2); ++oy)
        for (std::int64_t ox = 0; ox < dy.dim(3); ++ox) {
          const Taps ty = taps(oy, dx.dim(2), dy.dim(2), mode);
          const Taps tx = taps(ox, dx.dim(3), dy.dim(3), mode);
          const double g = at(dy, n, c, oy, ox);
          acc[index(n, c, ty.i0, tx.i0)] += g * ty.w0 * tx.w0;
          acc[index(n, c, ty.i0, tx.i1)] += g * ty.w0 * tx.w1;
          acc[index(n, c, ty.i1, tx.i0)] += g * ty.w1 * tx.w0;
          acc[index(n, c, ty.i1, tx.i1)] += g * ty.w1 * tx.w1;
        }
  for (std::size_t i = 0; i < acc.size(); ++i) dx.data<float>()[i] = static_cast<float>(acc[i]);
}

void concat_channels_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  for (std::int64_t n = 0; n < y.dim(0); ++n)
    for (std::int64_t c = 0; c < y.dim(1); ++c)
      for (std::int64_t h = 0; h < y.dim(2); ++h)
        for (std::int64_t w = 0; w < y.dim(3); ++w)
          at(y, n, c, h, w) = c < a.dim(1) ? at(a, n, c, h, w) : at(b, n, c - a.dim(1), h, w);
}

void concat_channels_backward(const Tensor& dy, Tensor& da, Tensor& db) {
  const std::int64_t ca = da.defined() ? da.dim(1) : dy.dim(1) - db.dim(1);
  for (std::int64_t n = 0; n < dy.dim(0); ++n)
    for (std::int64_t c = 0; c < dy.dim(1); ++c)
      for (std::int64_t h = 0; h < dy.dim(2); ++h)
        for (std::int64_t w = 0; w < dy.dim(3); ++w) {
          if (c < ca && da.defined()) at(da, n, c, h, w) = at(dy, n, c, h, w);
          if (c >= ca && db.defined()) at(db, n, c - ca, h, w) = at(dy, n, c, h, w);
        }
}

void pixel_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                 const Tensor& class_weights, Tensor& probs, Tensor& loss,
                                 const PixelLossParams& params) {
  softmax_pixels(logits, probs);
  const std::int64_t n = logits.dim(0), k = logits.dim(1), plane = logits.dim(2) * logits.dim(3);
  double total = 0, weight = 0;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < plane; ++i) {
      const std::int64_t l = label_at(labels, b * plane + i, k, params);
      if (l < 0) continue;
      const double w = class_weights.defined() ? class_weights.data<float>()[l] : 1.0;
      // -log softmax from the logits (finite where the probability underflows).
      const float* x = logits.data<float>() + b * k * plane + i;
      double mx = x[0], sum = 0;
      for (std::int64_t c = 1; c < k; ++c) mx = std::max(mx, static_cast<double>(x[c * plane]));
      for (std::int64_t c = 0; c < k; ++c) sum += std::exp(x[c * plane] - mx);
      total += w * (mx + std::log(sum) - x[l * plane]);
      weight += w;
    }
  loss.data<float>()[0] = weight > 0 ? static_cast<float>(total / weight) : 0.0f;
  loss.data<float>()[1] = static_cast<float>(weight);
}

void pixel_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                  const Tensor& class_weights, const Tensor& loss, Tensor& dlogits,
                                  const PixelLossParams& params) {
  const std::int64_t n = probs.dim(0), k = probs.dim(1), plane = probs.dim(2) * probs.dim(3);
  const double weight = loss.data<float>()[1];
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < plane; ++i) {
      const std::int64_t l = label_at(labels, b * plane + i, k, params);
      const double w = l < 0 || weight <= 0
                           ? 0.0
                           : (class_weights.defined() ? class_weights.data<float>()[l] : 1.0);
      for (std::int64_t c = 0; c < k; ++c) {
        const std::int64_t e = (b * k + c) * plane + i;
        dlogits.data<float>()[e] = static_cast<float>(
            w == 0 ? 0.0 : w * (probs.data<float>()[e] - (c == l ? 1.0 : 0.0)) / weight);
      }
    }
}

void dice_loss_forward(const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& sums,
                       Tensor& loss, const PixelLossParams& params) {
  softmax_pixels(logits, probs);
  const std::int64_t n = logits.dim(0), k = logits.dim(1), plane = logits.dim(2) * logits.dim(3);
  double total = 0;
  for (std::int64_t c = 0; c < k; ++c) {
    double inter = 0, p_sum = 0, g_sum = 0;
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < plane; ++i) {
        const std::int64_t l = label_at(labels, b * plane + i, k, params);
        if (l < 0) continue;
        const double p = probs.data<float>()[(b * k + c) * plane + i];
        const double g = l == c ? 1.0 : 0.0;
        inter += p * g;
        p_sum += p;
        g_sum += g;
      }
    sums.data<float>()[c * 3 + 0] = static_cast<float>(inter);
    sums.data<float>()[c * 3 + 1] = static_cast<float>(p_sum);
    sums.data<float>()[c * 3 + 2] = static_cast<float>(g_sum);
    if (g_sum > 0) {
      total += 1.0 - (2 * inter + params.smooth) / std::max(p_sum + g_sum + params.smooth, 1e-7);
    }
  }
  loss.data<float>()[0] = static_cast<float>(total / static_cast<double>(k));
}

void dice_loss_backward(const Tensor& probs, const Tensor& labels, const Tensor& sums,
                        Tensor& dlogits, const PixelLossParams& params) {
  const std::int64_t n = probs.dim(0), k = probs.dim(1), plane = probs.dim(2) * probs.dim(3);
  std::vector<double> dp(static_cast<std::size_t>(k));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < plane; ++i) {
      const std::int64_t l = label_at(labels, b * plane + i, k, params);
      double dot = 0;
      for (std::int64_t c = 0; c < k; ++c) {
        const double inter = sums.data<float>()[c * 3], p_sum = sums.data<float>()[c * 3 + 1],
                     g_sum = sums.data<float>()[c * 3 + 2];
        const double den = p_sum + g_sum + params.smooth, num = 2 * inter + params.smooth;
        // d(1 - num / den) / dp for this pixel; 0 for a class absent from the labels,
        // an ignored pixel, or where the denominator's clamp holds.
        double d = 0;
        if (l >= 0 && g_sum > 0 && den > 1e-7)
          d = -(2.0 * (l == c ? 1 : 0) * den - num) / (den * den);
        dp[static_cast<std::size_t>(c)] = d / static_cast<double>(k);
        dot += probs.data<float>()[(b * k + c) * plane + i] * dp[static_cast<std::size_t>(c)];
      }
      for (std::int64_t c = 0; c < k; ++c) {
        const std::int64_t e = (b * k + c) * plane + i;
        dlogits.data<float>()[e] =
            static_cast<float>(probs.data<float>()[e] * (dp[static_cast<std::size_t>(c)] - dot));
      }
    }
}

}  // namespace stoke::cpu::naive
