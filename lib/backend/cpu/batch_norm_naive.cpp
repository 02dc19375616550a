// Batch norm reference over (N, H, W) per channel, in double.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu::naive {

namespace {
double at(const float* p, std::int64_t n, std::int64_t c, std::int64_t i, std::int64_t C,
          std::int64_t HW) {
  return p[(n * C + c) * HW + i];
}
}  // namespace

void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 Tensor& y, Tensor& running_mean, Tensor& running_var,
                                 Tensor& save_mean, Tensor& save_invstd,
                                 const BatchNormParams& prm) {
  const std::int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3), M = N * HW;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (std::int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) mean += at(xp, n, c, i, C, HW);
    mean /= static_cast<double>(M);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) var += std::pow(at(xp, n, c, i, C, HW) - mean, 2);
    var /= static_cast<double>(M);
    const double invstd = 1.0 / std::sqrt(var + prm.epsilon);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i)
        yp[(n * C + c) * HW + i] =
            static_cast<float>((at(xp, n, c, i, C, HW) - mean) * invstd * gamma.data<float>()[c] +
                               beta.data<float>()[c]);
    const double unbiased = M > 1 ? var * static_cast<double>(M) / static_cast<double>(M - 1) : var;
    float& rm = running_mean.data<float>()[c];
    float& rv = running_var.data<float>()[c];
    rm = static_cast<float>((1.0 - prm.momentum) * rm + prm.momentum * mean);
    rv = static_cast<float>((1.0 - prm.momentum) * rv + prm.momentum * unbiased);
    save_mean.data<float>()[c] = static_cast<float>(mean);
    save_invstd.data<float>()[c] = static_cast<float>(invstd);
  }
}

void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                                  const BatchNormParams& prm) {
  const std::int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c) {
      const double invstd =
          1.0 / std::sqrt(static_cast<double>(running_var.data<float>()[c]) + prm.epsilon);
      for (std::int64_t i = 0; i < HW; ++i)
        yp[(n * C + c) * HW + i] =
            static_cast<float>((at(xp, n, c, i, C, HW) - running_mean.data<float>()[c]) * invstd *
                                   gamma.data<float>()[c] +
                               beta.data<float>()[c]);
    }
}

// The saved statistics carry epsilon already: params is not needed here.
void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta, const BatchNormParams& /*params*/) {
  const std::int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  const double M = static_cast<double>(N * HW);
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  for (std::int64_t c = 0; c < C; ++c) {
    const double mean = save_mean.data<float>()[c], invstd = save_invstd.data<float>()[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        const double d = at(dyp, n, c, i, C, HW);
        sum_dy += d;
        sum_dy_xhat += d * (at(xp, n, c, i, C, HW) - mean) * invstd;
      }
    const double g = gamma.data<float>()[c];
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < HW; ++i) {
        const double xhat = (at(xp, n, c, i, C, HW) - mean) * invstd;
        dxp[(n * C + c) * HW + i] = static_cast<float>(
            g * invstd * (at(dyp, n, c, i, C, HW) - sum_dy / M - xhat * sum_dy_xhat / M));
      }
    dgamma.data<float>()[c] = static_cast<float>(sum_dy_xhat);
    dbeta.data<float>()[c] = static_cast<float>(sum_dy);
  }
}

}  // namespace stoke::cpu::naive
