// Batch norm: channels split over chunks; per channel, plane sums in float
// (xsimd, two accumulators) accumulated across planes in double; the
// normalization itself is one xsimd scale+shift (+ ReLU when fused) per plane.
#include <cmath>
#include <string>

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

// Training forward; relu: y = max(BN(x), 0) in the same pass (a following
// ReLU folded in).
void forward_training(CpuBackend& be, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                      Tensor& y, Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                      Tensor& save_invstd, const BatchNormParams& prm, bool relu) {
  const Dims d = dims(x);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = be.simd_kernels();
  const double m = static_cast<double>(d.n * d.hw);
  for_chunks(be, d.c, be.chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      double sum = 0.0;
      for (std::size_t n = 0; n < d.n; ++n) sum += k.sum(xp + (n * d.c + c) * d.hw, d.hw);
      const double mean = sum / m;
      const float mean_f = static_cast<float>(mean);
      double sq = 0.0;
      for (std::size_t n = 0; n < d.n; ++n)
        sq += k.centered_squares(xp + (n * d.c + c) * d.hw, d.hw, mean_f);
      const double var = sq / m;
      const double invstd = 1.0 / std::sqrt(var + prm.epsilon);
      const float scale = static_cast<float>(invstd * gamma.data<float>()[c]);
      const float shift =
          static_cast<float>(beta.data<float>()[c] - mean * invstd * gamma.data<float>()[c]);
      for (std::size_t n = 0; n < d.n; ++n) {
        const std::size_t at = (n * d.c + c) * d.hw;
        if (relu) {
          k.scale_shift_relu(xp + at, yp + at, d.hw, scale, shift);
        } else {
          k.scale_shift(xp + at, yp + at, d.hw, scale, shift);
        }
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

// Backward; relu_y (y of the fused forward, or null): dy masked to y > 0.
void backward(CpuBackend& be, const Tensor& x, const float* relu_y, const Tensor& dy,
              const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
              Tensor& dgamma, Tensor& dbeta) {
  const Dims d = dims(x);
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const SimdKernels& k = be.simd_kernels();
  const double m = static_cast<double>(d.n * d.hw);
  for_chunks(be, d.c, be.chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      const float mean = save_mean.data<float>()[c];
      const float invstd = save_invstd.data<float>()[c];
      double sum_dy = 0.0, sum_dy_xc = 0.0;
      for (std::size_t n = 0; n < d.n; ++n) {
        const std::size_t at = (n * d.c + c) * d.hw;
        float sums[2];
        k.bn_backward_sums(xp + at, dyp + at, relu_y ? relu_y + at : nullptr, d.hw, mean, sums);
        sum_dy += sums[0];
        sum_dy_xc += sums[1];
      }
      const double dgamma_c = sum_dy_xc * invstd;
      // dx = a * dy + b * (x - mean) + cst, with xhat = (x - mean) * invstd;
      // centred first so a large mean does not cancel digits away.
      const double g = gamma.data<float>()[c];
      const float a = static_cast<float>(g * invstd);
      const float b = static_cast<float>(-g * invstd * invstd * dgamma_c / m);
      const float cst = static_cast<float>(-g * invstd * sum_dy / m);
      for (std::size_t n = 0; n < d.n; ++n) {
        const std::size_t at = (n * d.c + c) * d.hw;
        k.bn_backward_apply(xp + at, dyp + at, relu_y ? relu_y + at : nullptr, dxp + at, d.hw, mean,
                            a, b, cst);
      }
      dgamma.data<float>()[c] = static_cast<float>(dgamma_c);
      dbeta.data<float>()[c] = static_cast<float>(sum_dy);
    }
  });
}

}  // namespace

void CpuBackend::do_batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                                const Tensor& beta, Tensor& y, Tensor& running_mean,
                                                Tensor& running_var, Tensor& save_mean,
                                                Tensor& save_invstd, const BatchNormParams& prm) {
  forward_training(*this, x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd, prm,
                   false);
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
                                        Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                        const BatchNormParams& /*params*/) {
  backward(*this, x, nullptr, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

void CpuBackend::do_batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma,
                                                     const Tensor& beta, Tensor& y,
                                                     Tensor& running_mean, Tensor& running_var,
                                                     Tensor& save_mean, Tensor& save_invstd,
                                                     const BatchNormParams& params) {
  forward_training(*this, x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd,
                   params, true);
}

void CpuBackend::do_batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                             const Tensor& gamma, const Tensor& save_mean,
                                             const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                             Tensor& dbeta, const BatchNormParams& /*params*/) {
  backward(*this, x, y.data<float>(), dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

}  // namespace stoke::cpu
