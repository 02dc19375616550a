// Segmentation ops through the custom kernels of kernels/segment.cu, on the
// stream: upsampling, channel concatenation, the per-pixel losses.
#include "backend/cuda/cuda_backend.hpp"

namespace stoke::cuda {

namespace {
int mode_number(UpsampleMode mode) {
  return mode == UpsampleMode::kNearest ? 0 : 1;
}
}  // namespace

void CudaBackend::do_upsample2d_forward(const Tensor& x, Tensor& y, UpsampleMode mode) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const long long planes = x.dim(0) * x.dim(1);
  const int h = static_cast<int>(x.dim(2)), w = static_cast<int>(x.dim(3));
  const int oh = static_cast<int>(y.dim(2)), ow = static_cast<int>(y.dim(3));
  const int m = mode_number(mode);
  launch_n("stoke_upsample_forward", y.numel(), {&xp, &yp, &planes, &h, &w, &oh, &ow, &m});
}

void CudaBackend::do_upsample2d_backward(const Tensor& dy, Tensor& dx, UpsampleMode mode) {
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long planes = dx.dim(0) * dx.dim(1);
  const int h = static_cast<int>(dx.dim(2)), w = static_cast<int>(dx.dim(3));
  const int oh = static_cast<int>(dy.dim(2)), ow = static_cast<int>(dy.dim(3));
  const int m = mode_number(mode);
  launch_n("stoke_upsample_backward", planes * h, {&dyp, &dxp, &planes, &h, &w, &oh, &ow, &m});
}

void CudaBackend::do_concat_channels_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const long long n = a.dim(0), ca = a.dim(1), cb = b.dim(1), plane = a.dim(2) * a.dim(3);
  launch_n("stoke_concat_forward", y.numel(), {&ap, &bp, &yp, &n, &ca, &cb, &plane});
}

void CudaBackend::do_concat_channels_backward(const Tensor& dy, Tensor& da, Tensor& db) {
  const float* dyp = dy.data<float>();
  float* dap = da.defined() ? da.data<float>() : nullptr;
  float* dbp = db.defined() ? db.data<float>() : nullptr;
  const long long n = dy.dim(0), plane = dy.dim(2) * dy.dim(3);
  const long long ca = da.defined() ? da.dim(1) : dy.dim(1) - db.dim(1), cb = dy.dim(1) - ca;
  launch_n("stoke_concat_backward", dy.numel(), {&dyp, &dap, &dbp, &n, &ca, &cb, &plane});
}

void CudaBackend::do_pixel_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                 const Tensor& class_weights, Tensor& probs,
                                                 Tensor& loss, const PixelLossParams& params) {
  const long long n = logits.dim(0), plane = logits.dim(2) * logits.dim(3), pixels = n * plane;
  const int k = static_cast<int>(logits.dim(1)), ignore = params.ignore_label;
  const float* lp = logits.data<float>();
  float* pp = probs.data<float>();
  launch_n("stoke_pixel_softmax", pixels, {&lp, &pp, &n, &k, &plane});
  // Per-pixel loss and weight in the stream-ordered workspace (no
  // convolution is using it while this op runs on the one stream).
  float* rows = static_cast<float*>(
      workspace(2 * static_cast<std::size_t>(pixels > 0 ? pixels : 1) * sizeof(float)));
  float* row_loss = rows;
  float* row_weight = rows + pixels;
  const std::int32_t* lab = labels.data<std::int32_t>();
  const float* wp = class_weights.defined() ? class_weights.data<float>() : nullptr;
  launch_n("stoke_pixel_ce_rows", pixels,
           {&lp, &lab, &wp, &row_loss, &row_weight, &n, &k, &plane, &ignore});
  float* lossp = loss.data<float>();
  launch("stoke_pixel_ce_reduce", dim3(1), dim3(256), {&row_loss, &row_weight, &lossp, &pixels});
}

void CudaBackend::do_pixel_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                  const Tensor& class_weights, const Tensor& loss,
                                                  Tensor& dlogits, const PixelLossParams& params) {
  const long long n = probs.dim(0), plane = probs.dim(2) * probs.dim(3);
  const int k = static_cast<int>(probs.dim(1)), ignore = params.ignore_label;
  const float* pp = probs.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  const float* wp = class_weights.defined() ? class_weights.data<float>() : nullptr;
  const float* lossp = loss.data<float>();
  float* dp = dlogits.data<float>();
  launch_n("stoke_pixel_ce_backward", probs.numel(),
           {&pp, &lab, &wp, &lossp, &dp, &n, &k, &plane, &ignore});
}

void CudaBackend::do_dice_loss_forward(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                       Tensor& sums, Tensor& loss, const PixelLossParams& params) {
  const long long n = logits.dim(0), plane = logits.dim(2) * logits.dim(3);
  const int k = static_cast<int>(logits.dim(1)), ignore = params.ignore_label;
  const float smooth = params.smooth;
  const float* lp = logits.data<float>();
  float* pp = probs.data<float>();
  launch_n("stoke_pixel_softmax", n * plane, {&lp, &pp, &n, &k, &plane});
  const std::int32_t* lab = labels.data<std::int32_t>();
  float* sp = sums.data<float>();
  launch("stoke_dice_sums", dim3(static_cast<unsigned>(k)), dim3(256),
         {&pp, &lab, &sp, &n, &k, &plane, &ignore});
  float* lossp = loss.data<float>();
  launch("stoke_dice_loss", dim3(1), dim3(1), {&sp, &lossp, &k, &smooth});
}

void CudaBackend::do_dice_loss_backward(const Tensor& probs, const Tensor& labels,
                                        const Tensor& sums, Tensor& dlogits,
                                        const PixelLossParams& params) {
  const long long n = probs.dim(0), plane = probs.dim(2) * probs.dim(3);
  const int k = static_cast<int>(probs.dim(1)), ignore = params.ignore_label;
  const float smooth = params.smooth;
  const float* pp = probs.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  const float* sp = sums.data<float>();
  float* dp = dlogits.data<float>();
  launch_n("stoke_dice_backward", n * plane,
           {&pp, &lab, &sp, &dp, &n, &k, &plane, &ignore, &smooth});
}

}  // namespace stoke::cuda
