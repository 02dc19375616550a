// The backend's front doors: every op's arguments checked once, for every
// backend (shapes, dtypes, the tensors' backend, aliasing, parameters), then
// the backend's implementation. Backends check none of this again.
#include <string>
#include <type_traits>

#include "backend/op_check.hpp"
#include "backend/update_scalars.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke {

// Each front door has exactly the parameters the op list gives it.
#define STOKE_OP_SIGNATURE_CHECK(kind, name, params, args)                         \
  static_assert(std::is_same_v<decltype(&Backend::name), void(Backend::*) params>, \
                "Backend::" #name " differs from its STOKE_OPS entry");
STOKE_OPS(STOKE_OP_SIGNATURE_CHECK)
#undef STOKE_OP_SIGNATURE_CHECK

using detail::Aliasing;
using detail::checked_conv_output;
using detail::OpCheck;

namespace {

Shape checked_pool_output(OpCheck& check, const Tensor& x, const Pool2dParams& p) {
  check.rank("x", x, 4);
  try {
    return pool2d_output_shape(x.shape(), p);
  } catch (const InvalidArgument& e) {
    check.fail(e.what());
  }
}

}  // namespace

void Backend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                             const Conv2dParams& params) {
  OpCheck check(*this, Op::kConv2dForward);
  check.supported("x", x);
  const Shape ys = checked_conv_output(check, x, w, params);
  check.input("x", x, x.shape()).input("w", w, w.shape()).optional_input("bias", bias, {w.dim(0)});
  check.output("y", y, ys).done();
  do_conv2d_forward(x, w, bias, y, params);
}

void Backend::conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                              Tensor& dw, Tensor& db, const Conv2dParams& params) {
  OpCheck check(*this, Op::kConv2dBackward);
  check.supported("x", x);
  const Shape ys = checked_conv_output(check, x, w, params);
  check.input("x", x, x.shape()).input("w", w, w.shape()).input("dy", dy, ys);
  check.optional_output("dx", dx, x.shape()).output("dw", dw, w.shape());
  check.optional_output("db", db, {w.dim(0)}).done();
  do_conv2d_backward(x, w, dy, dx, dw, db, params);
}

void Backend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          Tensor& y, Tensor& running_mean, Tensor& running_var,
                                          Tensor& save_mean, Tensor& save_invstd,
                                          const BatchNormParams& params) {
  OpCheck check(*this, Op::kBatchNormForwardTraining);
  detail::check_batch_norm_training(check, x, gamma, beta, y, running_mean, running_var, save_mean,
                                    save_invstd, params);
  do_batch_norm_forward_training(x, gamma, beta, y, running_mean, running_var, save_mean,
                                 save_invstd, params);
}

void Backend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& running_mean, const Tensor& running_var,
                                           Tensor& y, const BatchNormParams& params) {
  OpCheck check(*this, Op::kBatchNormForwardInference);
  check.supported("x", x).rank("x", x, 4);
  const Shape c{x.dim(1)};
  check.input("x", x, x.shape()).input("gamma", gamma, c).input("beta", beta, c);
  check.input("running_mean", running_mean, c).input("running_var", running_var, c);
  check.output("y", y, x.shape());
  check.require(params.epsilon > 0.0f, "epsilon must be > 0").done();
  do_batch_norm_forward_inference(x, gamma, beta, running_mean, running_var, y, params);
}

void Backend::batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                  const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta, const BatchNormParams& params) {
  OpCheck check(*this, Op::kBatchNormBackward);
  check.supported("x", x).rank("x", x, 4);
  const Shape c{x.dim(1)};
  check.input("x", x, x.shape()).input("dy", dy, x.shape()).input("gamma", gamma, c);
  check.input("save_mean", save_mean, c).input("save_invstd", save_invstd, c);
  check.output("dx", dx, x.shape()).output("dgamma", dgamma, c).output("dbeta", dbeta, c);
  check.require(params.epsilon > 0.0f, "epsilon must be > 0").done();
  do_batch_norm_backward(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, params);
}

void Backend::relu_forward(const Tensor& x, Tensor& y) {
  OpCheck check(*this, Op::kReluForward, Aliasing::kExactAllowed);
  check.supported("x", x).input("x", x, x.shape()).output("y", y, x.shape()).done();
  do_relu_forward(x, y);
}

void Backend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  OpCheck check(*this, Op::kReluBackward, Aliasing::kExactAllowed);
  check.supported("y", y).input("y", y, y.shape()).input("dy", dy, y.shape());
  check.output("dx", dx, y.shape()).done();
  do_relu_backward(y, dy, dx);
}

void Backend::max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) {
  OpCheck check(*this, Op::kMaxPool2dForward);
  check.supported("x", x);
  const Shape ys = checked_pool_output(check, x, params);
  check.input("x", x, x.shape()).output("y", y, ys).done();
  do_max_pool2d_forward(x, y, params);
}

void Backend::max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx,
                                  const Pool2dParams& params) {
  OpCheck check(*this, Op::kMaxPool2dBackward);
  check.supported("x", x);
  const Shape ys = checked_pool_output(check, x, params);
  check.input("x", x, x.shape()).input("y", y, ys).input("dy", dy, ys);
  check.output("dx", dx, x.shape()).done();
  do_max_pool2d_backward(x, y, dy, dx, params);
}

void Backend::avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) {
  OpCheck check(*this, Op::kAvgPool2dForward);
  check.supported("x", x);
  const Shape ys = checked_pool_output(check, x, params);
  check.input("x", x, x.shape()).output("y", y, ys).done();
  do_avg_pool2d_forward(x, y, params);
}

void Backend::avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& params) {
  OpCheck check(*this, Op::kAvgPool2dBackward);
  check.supported("dx", dx);
  const Shape ys = checked_pool_output(check, dx, params);
  check.input("dy", dy, ys).output("dx", dx, dx.shape()).done();
  do_avg_pool2d_backward(dy, dx, params);
}

void Backend::global_avg_pool_forward(const Tensor& x, Tensor& y) {
  OpCheck check(*this, Op::kGlobalAvgPoolForward);
  check.supported("x", x).rank("x", x, 4);
  check.input("x", x, x.shape()).output("y", y, {x.dim(0), x.dim(1)}).done();
  do_global_avg_pool_forward(x, y);
}

void Backend::global_avg_pool_backward(const Tensor& dy, Tensor& dx) {
  OpCheck check(*this, Op::kGlobalAvgPoolBackward);
  check.supported("dx", dx).rank("dx", dx, 4);
  check.input("dy", dy, {dx.dim(0), dx.dim(1)}).output("dx", dx, dx.shape()).done();
  do_global_avg_pool_backward(dy, dx);
}

void Backend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  OpCheck check(*this, Op::kAdd, Aliasing::kExactAllowed);
  check.supported("a", a).input("a", a, a.shape()).input("b", b, a.shape());
  check.output("y", y, a.shape()).done();
  do_add(a, b, y);
}

void Backend::accumulate(Tensor& dx, const Tensor& dy) {
  OpCheck check(*this, Op::kAccumulate, Aliasing::kExactAllowed);
  check.supported("dx", dx).input("dy", dy, dx.shape()).output("dx", dx, dx.shape()).done();
  do_accumulate(dx, dy);
}

void Backend::scale(Tensor& x, float alpha) {
  OpCheck check(*this, Op::kScale);
  check.supported("x", x).output("x", x, x.shape()).done();
  do_scale(x, alpha);
}

void Backend::all_finite(const Tensor& x, Tensor& flag) {
  OpCheck check(*this, Op::kAllFinite);
  check.supported("x", x).input("x", x, x.shape()).output("flag", flag, {1}).done();
  do_all_finite(x, flag);
}

void Backend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  OpCheck check(*this, Op::kLinearForward);
  check.supported("x", x).rank("x", x, 2).rank("w", w, 2);
  check.require(x.dim(1) == w.dim(1), "x " + shape_to_string(x.shape()) + " must be (N, K) and w " +
                                          shape_to_string(w.shape()) + " (M, K)");
  check.input("x", x, x.shape()).input("w", w, w.shape()).optional_input("bias", bias, {w.dim(0)});
  check.output("y", y, {x.dim(0), w.dim(0)}).done();
  do_linear_forward(x, w, bias, y);
}

void Backend::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                              Tensor& dw, Tensor& db) {
  OpCheck check(*this, Op::kLinearBackward);
  check.supported("x", x).rank("x", x, 2).rank("w", w, 2);
  check.require(x.dim(1) == w.dim(1), "x " + shape_to_string(x.shape()) + " must be (N, K) and w " +
                                          shape_to_string(w.shape()) + " (M, K)");
  check.input("x", x, x.shape()).input("w", w, w.shape()).input("dy", dy, {x.dim(0), w.dim(0)});
  check.optional_output("dx", dx, x.shape()).output("dw", dw, w.shape());
  check.optional_output("db", db, {w.dim(0)}).done();
  do_linear_backward(x, w, dy, dx, dw, db);
}

void Backend::softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                            Tensor& probs, Tensor& loss, Tensor& correct) {
  OpCheck check(*this, Op::kSoftmaxCrossEntropyForward);
  check.supported("logits", logits).rank("logits", logits, 2);
  check.input("logits", logits, logits.shape())
      .input("labels", labels, {logits.dim(0)}, DType::kInt32);
  check.output("probs", probs, logits.shape()).output("loss", loss, {1});
  check.output("correct", correct, {1}).done();
  do_softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
}

void Backend::softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                             Tensor& dlogits) {
  OpCheck check(*this, Op::kSoftmaxCrossEntropyBackward);
  check.supported("probs", probs).rank("probs", probs, 2);
  check.input("probs", probs, probs.shape()).input("labels", labels, {probs.dim(0)}, DType::kInt32);
  check.output("dlogits", dlogits, probs.shape()).done();
  do_softmax_cross_entropy_backward(probs, labels, dlogits);
}

void Backend::dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                              std::uint64_t seed) {
  OpCheck check(*this, Op::kDropoutForward, Aliasing::kExactAllowed);
  check.supported("x", x).require(p >= 0.0f && p < 1.0f,
                                  "p must be in [0, 1), got " + std::to_string(p));
  check.input("x", x, x.shape()).output("y", y, x.shape()).output("mask", mask, x.shape()).done();
  do_dropout_forward(x, y, mask, p, seed);
}

void Backend::dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  OpCheck check(*this, Op::kDropoutBackward, Aliasing::kExactAllowed);
  check.supported("dy", dy).input("dy", dy, dy.shape()).input("mask", mask, dy.shape());
  check.output("dx", dx, dy.shape()).done();
  do_dropout_backward(dy, mask, dx);
}

void Backend::sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                         const SgdParams& p) {
  OpCheck check(*this, Op::kSgdUpdate);
  check.supported("params", params).input("grads", grads, params.shape());
  check.output("params", params, params.shape())
      .output("velocity", velocity, params.shape())
      .done();
  check_update_scalars("sgd_update", p.scalars, kSgdScalars, *this);
  do_sgd_update(params, grads, velocity, p);
}

void Backend::adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                          const AdamParams& p) {
  OpCheck check(*this, Op::kAdamUpdate);
  check.supported("params", params).input("grads", grads, params.shape());
  check.output("params", params, params.shape()).output("m", m, params.shape());
  check.output("v", v, params.shape()).done();
  check_update_scalars("adam_update", p.scalars, kAdamScalars, *this);
  if (!p.scalars && p.step < 1) check.fail("step is 1-based, got " + std::to_string(p.step));
  do_adam_update(params, grads, m, v, p);
}

}  // namespace stoke
