// Softmax cross-entropy with accuracy: a warp per row, then one block
// reducing the rows' loss and hits (kernels/*.cu) on the stream.
#include "backend/cuda/cuda_backend.hpp"

namespace stoke::cuda {

void CudaBackend::do_softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                   Tensor& probs, Tensor& loss, Tensor& correct) {
  const int n = static_cast<int>(logits.dim(0)), c = static_cast<int>(logits.dim(1));
  // Per-row loss and hit in the (stream-ordered) workspace: ops run in order
  // on the one stream, so no convolution is using it now.
  const auto lock = workspace_lock();
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

}  // namespace stoke::cuda
