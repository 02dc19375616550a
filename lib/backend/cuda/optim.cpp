// Optimizer updates: one grid-stride sweep over the flat parameter block; the
// per-step values come from device memory when SgdParams/AdamParams::scalars is set.
#include <cmath>

#include "backend/cuda/cuda_backend.hpp"

namespace stoke::cuda {

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
    bias1 = static_cast<float>(1.0 -
                               std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step)));
    bias2 = static_cast<float>(1.0 -
                               std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step)));
  }
  const int decoupled = p.decoupled_weight_decay ? 1 : 0;
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const long long n = params.numel();
  launch_n("stoke_adam_update", n,
           {&w, &g, &mp, &vp, &scalars, &p.lr, &p.beta1, &p.beta2, &p.epsilon, &p.weight_decay,
            &decoupled, &bias1, &bias2, &n});
}

}  // namespace stoke::cuda
