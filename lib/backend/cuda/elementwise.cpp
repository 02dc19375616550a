// ReLU, residual add, gradient accumulation, dropout, softmax cross-entropy
// and the optimizer updates: custom kernels (kernels/*.cu) on the stream.
#include <cmath>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/update_scalars.hpp"
#include "stoke/error.hpp"

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

void CudaBackend::do_softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                Tensor& probs, Tensor& loss, Tensor& correct) {
  const int n = static_cast<int>(logits.dim(0)), c = static_cast<int>(logits.dim(1));
  // Per-row loss and hit in the (stream-ordered) workspace: ops run in order
  // on the one stream, so no convolution is using it now.
  float* rows =
      static_cast<float*>(workspace(2 * static_cast<std::size_t>(n > 0 ? n : 1) * sizeof(float)));
  float* row_loss = rows;
  float* row_correct = rows + n;
  const float* lp = logits.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  float* pp = probs.data<float>();
  if (n > 0) {
    const unsigned blocks =
        static_cast<unsigned>((n + 7) / 8);  // 8 warps per block, a warp per row
    launch("stoke_softmax_ce_rows", dim3(blocks < 65535 ? blocks : 65535), dim3(256),
           {&lp, &lab, &pp, &row_loss, &row_correct, &n, &c});
  }
  float* lossp = loss.data<float>();
  float* correctp = correct.data<float>();
  launch("stoke_softmax_ce_reduce", dim3(1), dim3(256),
         {&row_loss, &row_correct, &lossp, &correctp, &n});
}

void CudaBackend::do_softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                 Tensor& dlogits) {
  const int n = static_cast<int>(probs.dim(0)), c = static_cast<int>(probs.dim(1));
  const float* pp = probs.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  float* dp = dlogits.data<float>();
  launch_n("stoke_softmax_ce_backward", static_cast<long long>(n) * c, {&pp, &lab, &dp, &n, &c});
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

void CudaBackend::do_sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                             const SgdParams& p) {
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* v = velocity.data<float>();
  // With scalars the kernel reads the rate from device memory when it runs.
  const float* scalars = p.scalars ? p.scalars->data<float>() : nullptr;
  const int nesterov = p.nesterov ? 1 : 0;
  const long long n = params.numel();
  launch_n("stoke_sgd_update", n,
           {&w, &g, &v, &scalars, &p.lr, &p.momentum, &p.weight_decay, &nesterov, &n});
}

void CudaBackend::do_adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                              const AdamParams& p) {
  const float* scalars = p.scalars ? p.scalars->data<float>() : nullptr;
  float bias1 = 1.0f, bias2 = 1.0f;
  if (!scalars) {
    // Bias corrections in double on the host, as the CPU backend computes them.
    bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step)));
    bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step)));
  }
  const int decoupled = p.decoupled_weight_decay ? 1 : 0;
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const long long n = params.numel();
  launch_n("stoke_adam_update", n,
           {&w, &g, &mp, &vp, &scalars, &p.lr, &p.beta1, &p.beta2, &p.epsilon, &p.weight_decay, &decoupled,
            &bias1, &bias2, &n});
}

}  // namespace stoke::cuda
