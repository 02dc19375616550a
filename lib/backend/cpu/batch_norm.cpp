// Batch norm: channels split over chunks; per channel, plane sums in float
// (vectorized) accumulated across planes in double; the normalization itself
// is one xsimd scale+shift per plane.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/simd.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

struct Dims {
  std::size_t n, c, hw;
};

Dims dims(const Tensor& x) {
  return {static_cast<std::size_t>(x.dim(0)), static_cast<std::size_t>(x.dim(1)),
          static_cast<std::size_t>(x.dim(2) * x.dim(3))};
}

float plane_sum(const float* p, std::size_t n) {
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

}  // namespace

void CpuBackend::do_batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                                const Tensor& beta, Tensor& y, Tensor& running_mean,
                                                Tensor& running_var, Tensor& save_mean,
                                                Tensor& save_invstd, const BatchNormParams& prm) {
  const Dims d = dims(x);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  const double m = static_cast<double>(d.n * d.hw);
  for_chunks(*this, d.c, chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      double sum = 0.0;
      for (std::size_t n = 0; n < d.n; ++n) sum += plane_sum(xp + (n * d.c + c) * d.hw, d.hw);
      const double mean = sum / m;
      const float mean_f = static_cast<float>(mean);
      double sq = 0.0;
      for (std::size_t n = 0; n < d.n; ++n) {
        const float* p = xp + (n * d.c + c) * d.hw;
        float s = 0.0f;
        for (std::size_t i = 0; i < d.hw; ++i) s += (p[i] - mean_f) * (p[i] - mean_f);
        sq += s;
      }
      const double var = sq / m;
      const double invstd = 1.0 / std::sqrt(var + prm.epsilon);
      const float scale = static_cast<float>(invstd * gamma.data<float>()[c]);
      const float shift =
          static_cast<float>(beta.data<float>()[c] - mean * invstd * gamma.data<float>()[c]);
      for (std::size_t n = 0; n < d.n; ++n) {
        k.scale_shift(xp + (n * d.c + c) * d.hw, yp + (n * d.c + c) * d.hw, d.hw, scale, shift);
      }
      const double unbiased = m > 1 ? var * m / (m - 1) : var;
      float& rm = running_mean.data<float>()[c];
      float& rv = running_var.data<float>()[c];
      rm = static_cast<float>((1.0 - prm.momentum) * rm + prm.momentum * mean);
      rv = static_cast<float>((1.0 - prm.momentum) * rv + prm.momentum * unbiased);
      save_mean.data<float>()[c] = mean_f;
      save_invstd.data<float>()[c] = static_cast<float>(invstd);
    }
  });
}

void CpuBackend::do_batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, const Tensor& running_mean,
                                                 const Tensor& running_var, Tensor& y,
                                                 const BatchNormParams& prm) {
  const Dims d = dims(x);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  for_chunks(*this, d.n * d.c, chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t plane = begin; plane < end; ++plane) {
      const std::size_t c = plane % d.c;
      const double invstd =
          1.0 / std::sqrt(static_cast<double>(running_var.data<float>()[c]) + prm.epsilon);
      const double g = gamma.data<float>()[c];
      k.scale_shift(
          xp + plane * d.hw, yp + plane * d.hw, d.hw, static_cast<float>(invstd * g),
          static_cast<float>(beta.data<float>()[c] - running_mean.data<float>()[c] * invstd * g));
    }
  });
}

void CpuBackend::do_batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                        const Tensor& save_mean, const Tensor& save_invstd,
                                        Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const Dims d = dims(x);
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const double m = static_cast<double>(d.n * d.hw);
  for_chunks(*this, d.c, chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      const float mean = save_mean.data<float>()[c];
      const float invstd = save_invstd.data<float>()[c];
      double sum_dy = 0.0, sum_dy_xc = 0.0;
      for (std::size_t n = 0; n < d.n; ++n) {
        const float* xpl = xp + (n * d.c + c) * d.hw;
        const float* dpl = dyp + (n * d.c + c) * d.hw;
        float s = 0.0f, t = 0.0f;
        for (std::size_t i = 0; i < d.hw; ++i) {
          s += dpl[i];
          t += dpl[i] * (xpl[i] - mean);
        }
        sum_dy += s;
        sum_dy_xc += t;
      }
      const double dgamma_c = sum_dy_xc * invstd;
      // dx = a * dy + b * (x - mean) + cst, with xhat = (x - mean) * invstd;
      // centred first so a large mean does not cancel digits away.
      const double g = gamma.data<float>()[c];
      const float a = static_cast<float>(g * invstd);
      const float b = static_cast<float>(-g * invstd * invstd * dgamma_c / m);
      const float cst = static_cast<float>(-g * invstd * sum_dy / m);
      for (std::size_t n = 0; n < d.n; ++n) {
        const float* xpl = xp + (n * d.c + c) * d.hw;
        const float* dpl = dyp + (n * d.c + c) * d.hw;
        float* out = dxp + (n * d.c + c) * d.hw;
        for (std::size_t i = 0; i < d.hw; ++i) out[i] = a * dpl[i] + b * (xpl[i] - mean) + cst;
      }
      dgamma.data<float>()[c] = static_cast<float>(dgamma_c);
      dbeta.data<float>()[c] = static_cast<float>(sum_dy);
    }
  });
}

}  // namespace stoke::cpu
