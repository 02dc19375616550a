// Direct 7-loop convolution reference, accumulating in double.
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace naive {

namespace {
struct Geometry {
  std::int64_t n, c, h, w, k, r, s, p, q, cg, kg;
};
Geometry geometry(const Tensor& x, const Tensor& w, const Conv2dParams& params) {
  const Shape y = conv2d_output_shape(x.shape(), w.shape(), params);
  return {x.dim(0),
          x.dim(1),
          x.dim(2),
          x.dim(3),
          w.dim(0),
          w.dim(2),
          w.dim(3),
          y[2],
          y[3],
          w.dim(1),
          w.dim(0) / params.groups};
}
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                    const Conv2dParams& params) {
  const Geometry g = geometry(x, w, params);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  float* yp = y.data<float>();
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t k = 0; k < g.k; ++k)
      for (std::int64_t p = 0; p < g.p; ++p)
        for (std::int64_t q = 0; q < g.q; ++q) {
          double sum = bias.defined() ? bias.data<float>()[k] : 0.0;
          const std::int64_t group = k / g.kg;
          for (std::int64_t c = 0; c < g.cg; ++c)
            for (std::int64_t r = 0; r < g.r; ++r)
              for (std::int64_t s = 0; s < g.s; ++s) {
                const std::int64_t ih = p * params.stride_h - params.pad_h + r * params.dilation_h;
                const std::int64_t iw = q * params.stride_w - params.pad_w + s * params.dilation_w;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                sum +=
                    static_cast<double>(xp[((n * g.c + group * g.cg + c) * g.h + ih) * g.w + iw]) *
                    wp[((k * g.cg + c) * g.r + r) * g.s + s];
              }
          yp[((n * g.k + k) * g.p + p) * g.q + q] = static_cast<float>(sum);
        }
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db, const Conv2dParams& params) {
  const Geometry g = geometry(x, w, params);
  std::vector<double> dxd(static_cast<std::size_t>(x.numel()), 0.0);
  std::vector<double> dwd(static_cast<std::size_t>(w.numel()), 0.0);
  std::vector<double> dbd(static_cast<std::size_t>(g.k), 0.0);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* dyp = dy.data<float>();
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t k = 0; k < g.k; ++k)
      for (std::int64_t p = 0; p < g.p; ++p)
        for (std::int64_t q = 0; q < g.q; ++q) {
          const double d = dyp[((n * g.k + k) * g.p + p) * g.q + q];
          dbd[static_cast<std::size_t>(k)] += d;
          const std::int64_t group = k / g.kg;
          for (std::int64_t c = 0; c < g.cg; ++c)
            for (std::int64_t r = 0; r < g.r; ++r)
              for (std::int64_t s = 0; s < g.s; ++s) {
                const std::int64_t ih = p * params.stride_h - params.pad_h + r * params.dilation_h;
                const std::int64_t iw = q * params.stride_w - params.pad_w + s * params.dilation_w;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const std::int64_t xi = ((n * g.c + group * g.cg + c) * g.h + ih) * g.w + iw;
                const std::int64_t wi = ((k * g.cg + c) * g.r + r) * g.s + s;
                dxd[static_cast<std::size_t>(xi)] += d * wp[wi];
                dwd[static_cast<std::size_t>(wi)] += d * xp[xi];
              }
        }
  if (dx.defined()) {
    float* p = dx.data<float>();
    for (std::size_t i = 0; i < dxd.size(); ++i) p[i] = static_cast<float>(dxd[i]);
  }
  float* dwp = dw.data<float>();
  for (std::size_t i = 0; i < dwd.size(); ++i) dwp[i] = static_cast<float>(dwd[i]);
  if (db.defined()) {
    float* p = db.data<float>();
    for (std::size_t i = 0; i < dbd.size(); ++i) p[i] = static_cast<float>(dbd[i]);
  }
}

}  // namespace naive
}  // namespace stoke::cpu
