// Pooling references: max (first maximum wins), average (padding counts),
// global average.
#include <limits>
#include <string>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace naive {

namespace {
// Visits the in-bounds input offsets (within one plane) of output (p, q).
template <class F>
void window(const Pool2dParams& prm, std::int64_t h, std::int64_t w, std::int64_t p, std::int64_t q,
            F&& f) {
  for (int r = 0; r < prm.kernel_h; ++r)
    for (int s = 0; s < prm.kernel_w; ++s) {
      const std::int64_t ih = p * prm.stride_h - prm.pad_h + r,
                         iw = q * prm.stride_w - prm.pad_w + s;
      if (ih >= 0 && ih < h && iw >= 0 && iw < w) f(ih * w + iw);
    }
}
}  // namespace

void max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& prm) {
  const Shape& ys = y.shape();
  const std::int64_t planes = ys[0] * ys[1], h = x.dim(2), w = x.dim(3);
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t p = 0; p < ys[2]; ++p)
      for (std::int64_t q = 0; q < ys[3]; ++q) {
        float best = -std::numeric_limits<float>::infinity();
        window(prm, h, w, p, q,
               [&](std::int64_t i) { best = std::max(best, x.data<float>()[pl * h * w + i]); });
        y.data<float>()[(pl * ys[2] + p) * ys[3] + q] = best;
      }
}

void max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx,
                         const Pool2dParams& prm) {
  const Shape& ys = dy.shape();
  const std::int64_t planes = ys[0] * ys[1], h = x.dim(2), w = x.dim(3);
  for (std::int64_t i = 0; i < dx.numel(); ++i) dx.data<float>()[i] = 0.0f;
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t p = 0; p < ys[2]; ++p)
      for (std::int64_t q = 0; q < ys[3]; ++q) {
        const std::int64_t o = (pl * ys[2] + p) * ys[3] + q;
        bool done = false;
        window(prm, h, w, p, q, [&](std::int64_t i) {
          if (!done && x.data<float>()[pl * h * w + i] == y.data<float>()[o]) {
            dx.data<float>()[pl * h * w + i] += dy.data<float>()[o];
            done = true;
          }
        });
      }
}

void avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& prm) {
  const Shape& ys = y.shape();
  const std::int64_t planes = ys[0] * ys[1], h = x.dim(2), w = x.dim(3);
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t p = 0; p < ys[2]; ++p)
      for (std::int64_t q = 0; q < ys[3]; ++q) {
        double sum = 0;
        window(prm, h, w, p, q, [&](std::int64_t i) { sum += x.data<float>()[pl * h * w + i]; });
        y.data<float>()[(pl * ys[2] + p) * ys[3] + q] =
            static_cast<float>(sum / (prm.kernel_h * prm.kernel_w));
      }
}

void avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& prm) {
  const Shape& ys = dy.shape();
  const std::int64_t planes = ys[0] * ys[1], h = dx.dim(2), w = dx.dim(3);
  for (std::int64_t i = 0; i < dx.numel(); ++i) dx.data<float>()[i] = 0.0f;
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t p = 0; p < ys[2]; ++p)
      for (std::int64_t q = 0; q < ys[3]; ++q) {
        const float g = dy.data<float>()[(pl * ys[2] + p) * ys[3] + q] /
                        static_cast<float>(prm.kernel_h * prm.kernel_w);
        window(prm, h, w, p, q, [&](std::int64_t i) { dx.data<float>()[pl * h * w + i] += g; });
      }
}

void global_avg_pool_forward(const Tensor& x, Tensor& y) {
  const std::int64_t hw = x.dim(2) * x.dim(3);
  for (std::int64_t pl = 0; pl < x.dim(0) * x.dim(1); ++pl) {
    double sum = 0;
    for (std::int64_t i = 0; i < hw; ++i) sum += x.data<float>()[pl * hw + i];
    y.data<float>()[pl] = static_cast<float>(sum / static_cast<double>(hw));
  }
}

void global_avg_pool_backward(const Tensor& dy, Tensor& dx) {
  const std::int64_t hw = dx.dim(2) * dx.dim(3);
  for (std::int64_t pl = 0; pl < dx.dim(0) * dx.dim(1); ++pl)
    for (std::int64_t i = 0; i < hw; ++i)
      dx.data<float>()[pl * hw + i] = dy.data<float>()[pl] / static_cast<float>(hw);
}

}  // namespace naive
}  // namespace stoke::cpu
