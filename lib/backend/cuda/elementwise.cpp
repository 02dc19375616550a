// ReLU, residual add, gradient accumulation, dropout, softmax cross-entropy
// and the optimizer updates: custom kernels (kernels/*.cu) on the stream.
#include <cmath>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/update_scalars.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {

void CudaBackend::relu_forward(const Tensor& x, Tensor& y) {
  expect("relu_forward", "x", x, x.shape());
  expect("relu_forward", "y", y, x.shape());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const long long n = x.numel();
  launch_n("stoke_relu_forward", n, {&xp, &yp, &n});
}

void CudaBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  expect("relu_backward", "y", y, y.shape());
  expect("relu_backward", "dy", dy, y.shape());
  expect("relu_backward", "dx", dx, y.shape());
  // The kernel tests its first argument > 0: the output is positive exactly
  // where the input was.
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long n = y.numel();
  launch_n("stoke_relu_backward", n, {&yp, &dyp, &dxp, &n});
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  expect("add", "a", a, a.shape());
  expect("add", "b", b, a.shape());
  expect("add", "y", y, a.shape());
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const long long n = a.numel();
  launch_n("stoke_add", n, {&ap, &bp, &yp, &n});
}

void CudaBackend::accumulate(Tensor& dx, const Tensor& dy) {
  expect("accumulate", "dx", dx, dx.shape());
  expect("accumulate", "dy", dy, dx.shape());
  const float alpha = 1.0f;
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long n = dx.numel();
  launch_n("stoke_axpy", n, {&alpha, &dyp, &dxp, &n});
}

void CudaBackend::scale(Tensor& x, float alpha) {
  expect("scale", "x", x, x.shape());
  float* xp = x.data<float>();
  const long long n = x.numel();
  launch_n("stoke_scale", n, {&xp, &alpha, &n});
}

namespace {
void check_labels(const char* op, const Tensor& logits, const Tensor& labels) {
  expect_defined(op, "logits", logits);
  expect_defined(op, "labels", labels);
  if (logits.rank() != 2) {
    throw InvalidArgument(std::string(op) + ": logits must be (N, C), got " +
                          shape_to_string(logits.shape()));
  }
  if (labels.dtype() != DType::kInt32 || labels.shape() != Shape{logits.dim(0)}) {
    throw InvalidArgument(std::string(op) + ": labels must be int32 (" +
                          std::to_string(logits.dim(0)) + "), got " + to_string(labels.dtype()) +
                          " " + shape_to_string(labels.shape()));
  }
}
}  // namespace

void CudaBackend::softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                Tensor& probs, Tensor& loss, Tensor& correct) {
  const char* op = "softmax_cross_entropy_forward";
  check_labels(op, logits, labels);
  expect(op, "logits", logits, logits.shape());
  expect(op, "probs", probs, logits.shape());
  expect(op, "loss", loss, {1});
  expect(op, "correct", correct, {1});
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

void CudaBackend::softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                 Tensor& dlogits) {
  const char* op = "softmax_cross_entropy_backward";
  check_labels(op, probs, labels);
  expect(op, "probs", probs, probs.shape());
  expect(op, "dlogits", dlogits, probs.shape());
  const int n = static_cast<int>(probs.dim(0)), c = static_cast<int>(probs.dim(1));
  const float* pp = probs.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  float* dp = dlogits.data<float>();
  launch_n("stoke_softmax_ce_backward", static_cast<long long>(n) * c, {&pp, &lab, &dp, &n, &c});
}

void CudaBackend::dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                                  std::uint64_t seed) {
  if (!(p >= 0.0f && p < 1.0f))
    throw InvalidArgument("dropout_forward: p must be in [0, 1), got " + std::to_string(p));
  expect("dropout_forward", "x", x, x.shape());
  expect("dropout_forward", "y", y, x.shape());
  expect("dropout_forward", "mask", mask, x.shape());
  const float keep_scale = 1.0f / (1.0f - p);
  const unsigned long long s = seed;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  float* mp = mask.data<float>();
  const long long n = x.numel();
  launch_n("stoke_dropout_forward", n, {&xp, &yp, &mp, &p, &keep_scale, &s, &n});
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  expect("dropout_backward", "dy", dy, dy.shape());
  expect("dropout_backward", "mask", mask, dy.shape());
  expect("dropout_backward", "dx", dx, dy.shape());
  const float* dyp = dy.data<float>();
  const float* mp = mask.data<float>();
  float* dxp = dx.data<float>();
  const long long n = dy.numel();
  launch_n("stoke_mul", n, {&dyp, &mp, &dxp, &n});
}

void CudaBackend::sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                             const SgdParams& p) {
  expect("sgd_update", "params", params, params.shape());
  expect("sgd_update", "grads", grads, params.shape());
  expect("sgd_update", "velocity", velocity, params.shape());
  check_update_scalars("sgd_update", p.scalars, kSgdScalars, *this);
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

void CudaBackend::adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                              const AdamParams& p) {
  expect("adam_update", "params", params, params.shape());
  expect("adam_update", "grads", grads, params.shape());
  expect("adam_update", "m", m, params.shape());
  expect("adam_update", "v", v, params.shape());
  check_update_scalars("adam_update", p.scalars, kAdamScalars, *this);
  const float* scalars = p.scalars ? p.scalars->data<float>() : nullptr;
  float bias1 = 1.0f, bias2 = 1.0f;
  if (!scalars) {
    if (p.step < 1)
      throw InvalidArgument("adam_update: step is 1-based, got " + std::to_string(p.step));
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
