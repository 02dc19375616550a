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

// Input rows [h0, h1) and columns [w0, w1) an output element's window covers.
struct Window {
  std::int64_t h0, h1, w0, w1;
};

// [lo, hi) of input rows (or columns) covered by output index o.
inline void clip(std::int64_t o, int stride, int pad, int kernel, std::int64_t size,
                 std::int64_t& lo, std::int64_t& hi) {
  lo = o * stride - pad;
  hi = std::min(lo + kernel, size);
  lo = std::max<std::int64_t>(lo, 0);
}

template <class Body>
void over_planes(const CpuBackend& be, const Shape& ys, Body&& body) {
  for_chunks(be, static_cast<std::size_t>(ys[0] * ys[1]), be.chunks(),
             [&](int, std::size_t b, std::size_t e) {
               for (std::size_t pl = b; pl < e; ++pl) body(static_cast<std::int64_t>(pl));
             });
}

// The scaffolding the four windowed ops share: planes (n, c) split over
// chunks; per plane, begin(plane) and then body(plane, o, window) for every
// output element (o = p * Q + q, within the plane), with its window clipped
// to the input once per output row and column.
template <class Begin, class Body>
void for_each_window(const CpuBackend& be, const Shape& ys, const Plane& g, const Pool2dParams& prm,
                     Begin&& begin, Body&& body) {
  over_planes(be, ys, [&](std::int64_t pl) {
    begin(pl);
    for (std::int64_t p = 0; p < g.p; ++p) {
      Window win{};
      clip(p, prm.stride_h, prm.pad_h, prm.kernel_h, g.h, win.h0, win.h1);
      for (std::int64_t q = 0; q < g.q; ++q) {
        clip(q, prm.stride_w, prm.pad_w, prm.kernel_w, g.w, win.w0, win.w1);
        body(pl, p * g.q + q, win);
      }
    }
  });
}

constexpr auto kNoPlaneSetup = [](std::int64_t) {};

}  // namespace

void CpuBackend::do_max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& prm) {
  const Shape& ys = y.shape();
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for_each_window(*this, ys, g, prm, kNoPlaneSetup,
                  [&](std::int64_t pl, std::int64_t o, const Window& win) {
                    const float* in = xp + pl * g.h * g.w;
                    float best = -std::numeric_limits<float>::infinity();
                    for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                      for (std::int64_t iw = win.w0; iw < win.w1; ++iw)
                        best = std::max(best, in[ih * g.w + iw]);
                    yp[pl * g.p * g.q + o] = best;
                  });
}

void CpuBackend::do_max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                        Tensor& dx, const Pool2dParams& prm) {
  const Shape& ys = dy.shape();
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const auto zero_plane = [&](std::int64_t pl) {
    std::fill(dxp + pl * g.h * g.w, dxp + (pl + 1) * g.h * g.w, 0.0f);
  };
  for_each_window(*this, ys, g, prm, zero_plane,
                  [&](std::int64_t pl, std::int64_t o, const Window& win) {
                    const float* in = xp + pl * g.h * g.w;
                    float* din = dxp + pl * g.h * g.w;
                    const std::int64_t out = pl * g.p * g.q + o;
                    // The gradient goes to the first maximum only.
                    for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                      for (std::int64_t iw = win.w0; iw < win.w1; ++iw)
                        if (in[ih * g.w + iw] == yp[out]) {
                          din[ih * g.w + iw] += dyp[out];
                          return;
                        }
                  });
}

namespace {

// Average pooling with stride 1 along rows (PatchCore's 3x3 feature
// smoothing): each output row's sums are accumulated in a row of floats,
// window row by window row and tap by tap, so every output gets its terms in
// the general path's order (the same bits) while the loop over the output
// row vectorizes.
void avg_pool_unit_stride_w(const CpuBackend& be, const Tensor& x, Tensor& y,
                            const Pool2dParams& prm, float inv) {
  const Shape& ys = y.shape();
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const std::int64_t pad = prm.pad_w, kw = prm.kernel_w;
  // Output columns whose window lies inside the row: [qa, qb).
  const std::int64_t qa = std::min<std::int64_t>(pad, g.q);
  const std::int64_t qb = std::max<std::int64_t>(qa, std::min(g.q, g.w - kw + pad + 1));
  over_planes(be, ys, [&](std::int64_t pl) {
    const float* in = xp + pl * g.h * g.w;
    float* out = yp + pl * g.p * g.q;
    for (std::int64_t p = 0; p < g.p; ++p) {
      std::int64_t h0 = 0, h1 = 0;
      clip(p, prm.stride_h, prm.pad_h, prm.kernel_h, g.h, h0, h1);
      float* acc = out + p * g.q;
      std::fill(acc, acc + g.q, 0.0f);
      for (std::int64_t ih = h0; ih < h1; ++ih) {
        const float* row = in + ih * g.w;
        for (std::int64_t q = 0; q < g.q; ++q) {
          if (q == qa) q = qb;  // the interior below
          if (q >= g.q) break;
          std::int64_t w0 = 0, w1 = 0;
          clip(q, 1, prm.pad_w, prm.kernel_w, g.w, w0, w1);
          for (std::int64_t iw = w0; iw < w1; ++iw) acc[q] += row[iw];
        }
        for (std::int64_t t = 0; t < kw; ++t) {
          const float* tap = row + t - pad;
          for (std::int64_t q = qa; q < qb; ++q) acc[q] += tap[q];
        }
      }
      for (std::int64_t q = 0; q < g.q; ++q) acc[q] *= inv;
    }
  });
}

}  // namespace

void CpuBackend::do_avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& prm) {
  const Shape& ys = y.shape();
  const Plane g{x.dim(2), x.dim(3), ys[2], ys[3]};
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const float inv = 1.0f / static_cast<float>(prm.kernel_h * prm.kernel_w);
  if (prm.stride_w == 1) {
    avg_pool_unit_stride_w(*this, x, y, prm, inv);
    return;
  }
  for_each_window(*this, ys, g, prm, kNoPlaneSetup,
                  [&](std::int64_t pl, std::int64_t o, const Window& win) {
                    const float* in = xp + pl * g.h * g.w;
                    float sum = 0.0f;
                    for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                      for (std::int64_t iw = win.w0; iw < win.w1; ++iw) sum += in[ih * g.w + iw];
                    yp[pl * g.p * g.q + o] = sum * inv;
                  });
}

void CpuBackend::do_avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& prm) {
  const Shape& ys = dy.shape();
  const Plane g{dx.dim(2), dx.dim(3), ys[2], ys[3]};
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const float inv = 1.0f / static_cast<float>(prm.kernel_h * prm.kernel_w);
  const auto zero_plane = [&](std::int64_t pl) {
    std::fill(dxp + pl * g.h * g.w, dxp + (pl + 1) * g.h * g.w, 0.0f);
  };
  for_each_window(*this, ys, g, prm, zero_plane,
                  [&](std::int64_t pl, std::int64_t o, const Window& win) {
                    float* din = dxp + pl * g.h * g.w;
                    const float d = dyp[pl * g.p * g.q + o] * inv;
                    for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                      for (std::int64_t iw = win.w0; iw < win.w1; ++iw) din[ih * g.w + iw] += d;
                  });
}

void CpuBackend::do_global_avg_pool_forward(const Tensor& x, Tensor& y) {
  const std::int64_t hw = x.dim(2) * x.dim(3);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  over_planes(*this, {x.dim(0), x.dim(1)}, [&](std::int64_t pl) {
    float sum = 0.0f;
    for (std::int64_t i = 0; i < hw; ++i) sum += xp[pl * hw + i];
    yp[pl] = sum / static_cast<float>(hw);
  });
}

void CpuBackend::do_global_avg_pool_backward(const Tensor& dy, Tensor& dx) {
  const std::int64_t hw = dx.dim(2) * dx.dim(3);
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  over_planes(*this, {dx.dim(0), dx.dim(1)}, [&](std::int64_t pl) {
    std::fill(dxp + pl * hw, dxp + (pl + 1) * hw, dyp[pl] / static_cast<float>(hw));
  });
}

}  // namespace stoke::cpu
