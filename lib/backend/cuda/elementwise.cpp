// ReLU, residual add, gradient accumulation, scaling, the finite check and
// dropout: custom kernels (kernels/*.cu) on the stream.
#include "backend/cuda/cuda_backend.hpp"

namespace stoke::cuda {

void CudaBackend::do_relu_forward(const Tensor& x, Tensor& y) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const long long n = x.numel();
  launch_n("stoke_relu_forward", n, {&xp, &yp, &n});
}

void CudaBackend::do_relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  // The kernel tests its first argument > 0: the output is positive exactly
  // where the input was.
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long n = y.numel();
  launch_n("stoke_relu_backward", n, {&yp, &dyp, &dxp, &n});
}

void CudaBackend::do_add(const Tensor& a, const Tensor& b, Tensor& y) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const long long n = a.numel();
  launch_n("stoke_add", n, {&ap, &bp, &yp, &n});
}

void CudaBackend::do_accumulate(Tensor& dx, const Tensor& dy) {
  const float alpha = 1.0f;
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long n = dx.numel();
  launch_n("stoke_axpy", n, {&alpha, &dyp, &dxp, &n});
}

void CudaBackend::do_scale(Tensor& x, float alpha) {
  float* xp = x.data<float>();
  const long long n = x.numel();
  launch_n("stoke_scale", n, {&xp, &alpha, &n});
}

// The flag starts at 1; every thread that meets a NaN or an infinity writes
// 0 (the same value from every writer: no atomics needed).
void CudaBackend::do_all_finite(const Tensor& x, Tensor& flag) {
  fill(flag, 1.0f);
  const float* xp = x.data<float>();
  float* fp = flag.data<float>();
  const long long n = x.numel();
  launch_n("stoke_all_finite", n, {&xp, &fp, &n});
}

void CudaBackend::do_dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                                     std::uint64_t seed) {
  const float keep_scale = 1.0f / (1.0f - p);
  const unsigned long long s = seed;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  float* mp = mask.data<float>();
  const long long n = x.numel();
  launch_n("stoke_dropout_forward", n, {&xp, &yp, &mp, &p, &keep_scale, &s, &n});
}

void CudaBackend::do_dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  const float* dyp = dy.data<float>();
  const float* mp = mask.data<float>();
  float* dxp = dx.data<float>();
  const long long n = dy.numel();
  launch_n("stoke_mul", n, {&dyp, &mp, &dxp, &n});
}

}  // namespace stoke::cuda
