// Optimizer references (PyTorch semantics), in double.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"

namespace stoke::cpu::naive {

void sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity, const SgdParams& p) {
  for (std::int64_t i = 0; i < params.numel(); ++i) {
    float& w = params.data<float>()[i];
    float& v = velocity.data<float>()[i];
    const double g =
        static_cast<double>(grads.data<float>()[i]) + static_cast<double>(p.weight_decay) * w;
    v = static_cast<float>(p.momentum * static_cast<double>(v) + g);
    w = static_cast<float>(
        w - p.lr * (p.nesterov ? g + p.momentum * static_cast<double>(v) : static_cast<double>(v)));
  }
}

void adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const AdamParams& p) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
  for (std::int64_t i = 0; i < params.numel(); ++i) {
    double w = params.data<float>()[i];
    double g = grads.data<float>()[i];
    if (!p.decoupled_weight_decay) g += p.weight_decay * w;
    const double mi = p.beta1 * static_cast<double>(m.data<float>()[i]) + (1.0 - p.beta1) * g;
    const double vi = p.beta2 * static_cast<double>(v.data<float>()[i]) + (1.0 - p.beta2) * g * g;
    if (p.decoupled_weight_decay) w -= static_cast<double>(p.lr) * p.weight_decay * w;
    w -= p.lr * (mi / bc1) / (std::sqrt(vi / bc2) + p.epsilon);
    m.data<float>()[i] = static_cast<float>(mi);
    v.data<float>()[i] = static_cast<float>(vi);
    params.data<float>()[i] = static_cast<float>(w);
  }
}

}  // namespace stoke::cpu::naive
