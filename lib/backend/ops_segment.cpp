// The segmentation ops' front doors (stoke/backend.hpp, "segmentation ops"):
// checked once here for every backend, as the plain ops are in ops.cpp.
#include "backend/op_check.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke {

using detail::OpCheck;

namespace {

void check_mode(OpCheck& check, UpsampleMode mode) {
  check.require(mode == UpsampleMode::kNearest || mode == UpsampleMode::kBilinear,
                "unknown upsample mode " + std::to_string(static_cast<int>(mode)));
}

// logits (N, K, H, W) and labels int32 (N, H, W): the per-pixel losses' inputs.
void check_pixel_inputs(OpCheck& check, const char* name, const Tensor& scores,
                        const Tensor& labels) {
  check.supported(name, scores).rank(name, scores, 4);
  check.input(name, scores, scores.shape())
      .input("labels", labels, {scores.dim(0), scores.dim(2), scores.dim(3)}, DType::kInt32);
}

}  // namespace

void Backend::upsample2d_forward(const Tensor& x, Tensor& y, UpsampleMode mode) {
  OpCheck check(*this, Op::kUpsample2dForward);
  check.supported("x", x).rank("x", x, 4).rank("y", y, 4);
  check_mode(check, mode);
  check.require(
      y.dim(2) > 0 && y.dim(3) > 0 && x.dim(2) > 0 && x.dim(3) > 0,
      "empty spatial size " + shape_to_string(x.shape()) + " -> " + shape_to_string(y.shape()));
  check.input("x", x, x.shape()).output("y", y, {x.dim(0), x.dim(1), y.dim(2), y.dim(3)}).done();
  do_upsample2d_forward(x, y, mode);
}

void Backend::upsample2d_backward(const Tensor& dy, Tensor& dx, UpsampleMode mode) {
  OpCheck check(*this, Op::kUpsample2dBackward);
  check.supported("dy", dy).rank("dy", dy, 4).rank("dx", dx, 4);
  check_mode(check, mode);
  check.require(
      dy.dim(2) > 0 && dy.dim(3) > 0 && dx.dim(2) > 0 && dx.dim(3) > 0,
      "empty spatial size " + shape_to_string(dx.shape()) + " -> " + shape_to_string(dy.shape()));
  check.input("dy", dy, dy.shape())
      .output("dx", dx, {dy.dim(0), dy.dim(1), dx.dim(2), dx.dim(3)})
      .done();
  do_upsample2d_backward(dy, dx, mode);
}

void Backend::concat_channels_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  OpCheck check(*this, Op::kConcatChannelsForward);
  check.supported("a", a).rank("a", a, 4).rank("b", b, 4);
  check.input("a", a, a.shape()).input("b", b, {a.dim(0), b.dim(1), a.dim(2), a.dim(3)});
  check.output("y", y, {a.dim(0), a.dim(1) + b.dim(1), a.dim(2), a.dim(3)}).done();
  do_concat_channels_forward(a, b, y);
}

void Backend::concat_channels_backward(const Tensor& dy, Tensor& da, Tensor& db) {
  OpCheck check(*this, Op::kConcatChannelsBackward);
  check.supported("dy", dy).rank("dy", dy, 4);
  check.require(da.defined() || db.defined(), "neither da nor db is given");
  const std::int64_t ca = da.defined() ? da.dim(1) : dy.dim(1) - db.dim(1);
  check.require(ca >= 0 && ca <= dy.dim(1), "da and db split " + std::to_string(dy.dim(1)) +
                                                " channels into " + std::to_string(ca) + " and " +
                                                std::to_string(dy.dim(1) - ca));
  check.input("dy", dy, dy.shape());
  check.optional_output("da", da, {dy.dim(0), ca, dy.dim(2), dy.dim(3)});
  check.optional_output("db", db, {dy.dim(0), dy.dim(1) - ca, dy.dim(2), dy.dim(3)}).done();
  do_concat_channels_backward(dy, da, db);
}

void Backend::pixel_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                          const Tensor& class_weights, Tensor& probs, Tensor& loss,
                                          const PixelLossParams& params) {
  OpCheck check(*this, Op::kPixelCrossEntropyForward);
  check_pixel_inputs(check, "logits", logits, labels);
  check.optional_input("class_weights", class_weights, {logits.dim(1)});
  check.output("probs", probs, logits.shape()).output("loss", loss, {2}).done();
  do_pixel_cross_entropy_forward(logits, labels, class_weights, probs, loss, params);
}

void Backend::pixel_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                           const Tensor& class_weights, const Tensor& loss,
                                           Tensor& dlogits, const PixelLossParams& params) {
  OpCheck check(*this, Op::kPixelCrossEntropyBackward);
  check_pixel_inputs(check, "probs", probs, labels);
  check.optional_input("class_weights", class_weights, {probs.dim(1)});
  check.input("loss", loss, {2}).output("dlogits", dlogits, probs.shape()).done();
  do_pixel_cross_entropy_backward(probs, labels, class_weights, loss, dlogits, params);
}

void Backend::dice_loss_forward(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                Tensor& sums, Tensor& loss, const PixelLossParams& params) {
  OpCheck check(*this, Op::kDiceLossForward);
  check_pixel_inputs(check, "logits", logits, labels);
  check.require(params.smooth >= 0.0f, "smooth " + std::to_string(params.smooth) + " < 0");
  check.output("probs", probs, logits.shape()).output("sums", sums, {logits.dim(1), 3});
  check.output("loss", loss, {1}).done();
  do_dice_loss_forward(logits, labels, probs, sums, loss, params);
}

void Backend::dice_loss_backward(const Tensor& probs, const Tensor& labels, const Tensor& sums,
                                 Tensor& dlogits, const PixelLossParams& params) {
  OpCheck check(*this, Op::kDiceLossBackward);
  check_pixel_inputs(check, "probs", probs, labels);
  check.require(params.smooth >= 0.0f, "smooth " + std::to_string(params.smooth) + " < 0");
  check.input("sums", sums, {probs.dim(1), 3}).output("dlogits", dlogits, probs.shape()).done();
  do_dice_loss_backward(probs, labels, sums, dlogits, params);
}

}  // namespace stoke
