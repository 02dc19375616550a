// Pooling: planes (n, c) split over chunks; windows clipped to the input once
// per output row/column instead of bounds checks per tap.
#include <algorithm>
#include <limits>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

struct Plane {
  std::int64_t h, w, p, q;
};

// [lo, hi) of input rows (or columns) covered by output index o.
inline void clip(std::int64_t o, int stride, int pad, int kernel, std::int64_t size, std::int64_t& lo,
                 std::int64_t& hi) {
  lo = o * stride - pad;
  hi = std::min(lo + kernel, size);
  lo = std::max<std::int64_t>(lo, 0);
}

template <class Body>
void over_planes(const CpuBackend& be, const Shape& ys, Body&& body) {
  for_chunks(be, static_cast<std::size_t>(ys[0] * ys[1]), be.chunks(), [&](int, std::size_t b, std::size_t e) {
    for (std::size_t pl = b; pl < e; ++pl) body(static_cast<std::int64_t>(pl));
  });
}

}  // namespace

void CpuBackend::max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& prm) {
  const Shape ys = pool2d_output_shape(x.shape(), prm);
  expect_shape("max_pool2d_forward", "y", y, ys);
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  over_planes(*this, ys, [&](std::int64_t pl) {
    const float* in = xp + pl * g.h * g.w;
    float* out = yp + pl * g.p * g.q;
    for (std::int64_t p = 0; p < g.p; ++p) {
      std::int64_t h0, h1;
      clip(p, prm.stride_h, prm.pad_h, prm.kernel_h, g.h, h0, h1);
      for (std::int64_t q = 0; q < g.q; ++q) {
        std::int64_t w0, w1;
        clip(q, prm.stride_w, prm.pad_w, prm.kernel_w, g.w, w0, w1);
        float best = -std::numeric_limits<float>::infinity();
        for (std::int64_t ih = h0; ih < h1; ++ih)
          for (std::int64_t iw = w0; iw < w1; ++iw) best = std::max(best, in[ih * g.w + iw]);
        out[p * g.q + q] = best;
      }
    }
  });
}

void CpuBackend::max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx,
                                     const Pool2dParams& prm) {
  const Shape ys = pool2d_output_shape(x.shape(), prm);
  expect_shape("max_pool2d_backward", "y", y, ys);
  expect_shape("max_pool2d_backward", "dy", dy, ys);
  expect_shape("max_pool2d_backward", "dx", dx, x.shape());
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  over_planes(*this, ys, [&](std::int64_t pl) {
    const float* in = xp + pl * g.h * g.w;
    float* din = dxp + pl * g.h * g.w;
    std::fill(din, din + g.h * g.w, 0.0f);
    for (std::int64_t p = 0; p < g.p; ++p) {
      std::int64_t h0, h1;
      clip(p, prm.stride_h, prm.pad_h, prm.kernel_h, g.h, h0, h1);
      for (std::int64_t q = 0; q < g.q; ++q) {
        std::int64_t w0, w1;
        clip(q, prm.stride_w, prm.pad_w, prm.kernel_w, g.w, w0, w1);
        const std::int64_t o = pl * g.p * g.q + p * g.q + q;
        for (std::int64_t ih = h0; ih < h1; ++ih)
          for (std::int64_t iw = w0; iw < w1; ++iw)
            if (in[ih * g.w + iw] == yp[o]) {
              din[ih * g.w + iw] += dyp[o];
              goto next;  // first maximum only
            }
      next:;
      }
    }
  });
}

void CpuBackend::avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& prm) {
  const Shape ys = pool2d_output_shape(x.shape(), prm);
  expect_shape("avg_pool2d_forward", "y", y, ys);
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const float inv = 1.0f / static_cast<float>(prm.kernel_h * prm.kernel_w);
  over_planes(*this, ys, [&](std::int64_t pl) {
    const float* in = xp + pl * g.h * g.w;
    float* out = yp + pl * g.p * g.q;
    for (std::int64_t p = 0; p < g.p; ++p) {
      std::int64_t h0, h1;
      clip(p, prm.stride_h, prm.pad_h, prm.kernel_h, g.h, h0, h1);
      for (std::int64_t q = 0; q < g.q; ++q) {
        std::int64_t w0, w1;
        clip(q, prm.stride_w, prm.pad_w, prm.kernel_w, g.w, w0, w1);
        float sum = 0.0f;
        for (std::int64_t ih = h0; ih < h1; ++ih)
          for (std::int64_t iw = w0; iw < w1; ++iw) sum += in[ih * g.w + iw];
        out[p * g.q + q] = sum * inv;
      }
    }
  });
}

void CpuBackend::avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& prm) {
  const Shape ys = pool2d_output_shape(dx.shape(), prm);
  expect_shape("avg_pool2d_backward", "dy", dy, ys);
  const Plane g{dx.dim(2), dx.dim(3), ys[2], ys[3]};
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const float inv = 1.0f / static_cast<float>(prm.kernel_h * prm.kernel_w);
  over_planes(*this, ys, [&](std::int64_t pl) {
    float* din = dxp + pl * g.h * g.w;
    std::fill(din, din + g.h * g.w, 0.0f);
    for (std::int64_t p = 0; p < g.p; ++p) {
      std::int64_t h0, h1;
      clip(p, prm.stride_h, prm.pad_h, prm.kernel_h, g.h, h0, h1);
      for (std::int64_t q = 0; q < g.q; ++q) {
        std::int64_t w0, w1;
        clip(q, prm.stride_w, prm.pad_w, prm.kernel_w, g.w, w0, w1);
        const float d = dyp[pl * g.p * g.q + p * g.q + q] * inv;
        for (std::int64_t ih = h0; ih < h1; ++ih)
          for (std::int64_t iw = w0; iw < w1; ++iw) din[ih * g.w + iw] += d;
      }
    }
  });
}

void CpuBackend::global_avg_pool_forward(const Tensor& x, Tensor& y) {
  if (x.rank() != 4) throw InvalidArgument("global_avg_pool_forward: x must be (N, C, H, W), got " + shape_to_string(x.shape()));
  expect_shape("global_avg_pool_forward", "y", y, {x.dim(0), x.dim(1)});
  const std::int64_t hw = x.dim(2) * x.dim(3);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  over_planes(*this, {x.dim(0), x.dim(1)}, [&](std::int64_t pl) {
    float sum = 0.0f;
    for (std::int64_t i = 0; i < hw; ++i) sum += xp[pl * hw + i];
    yp[pl] = sum / static_cast<float>(hw);
  });
}

void CpuBackend::global_avg_pool_backward(const Tensor& dy, Tensor& dx) {
  if (dx.rank() != 4) throw InvalidArgument("global_avg_pool_backward: dx must be (N, C, H, W), got " + shape_to_string(dx.shape()));
  expect_shape("global_avg_pool_backward", "dy", dy, {dx.dim(0), dx.dim(1)});
  const std::int64_t hw = dx.dim(2) * dx.dim(3);
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  over_planes(*this, {dx.dim(0), dx.dim(1)}, [&](std::int64_t pl) {
    std::fill(dxp + pl * hw, dxp + (pl + 1) * hw, dyp[pl] / static_cast<float>(hw));
  });
}

}  // namespace stoke::cpu
