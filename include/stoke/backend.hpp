// The compute backend interface and its registry.
//
// A Backend is one device plus its ordered stream of work: every op is issued
// on that stream and may return before it has run (the CUDA backend enqueues
// on its compute stream; the CPU backend runs it at once). Ops take tensors
// that live on this backend, never read results back to the host, and take
// their temporary memory (workspace) from the backend's allocator, so a whole
// training step runs without a host synchronization; synchronize() waits.
// Scalars an op produces (loss, correct count) are written to 1-element
// tensors for the same reason.
//
// All ops are float32 NCHW unless supports() says otherwise. Shapes are given
// in comments as (N, C, H, W). Output tensors are preallocated by the caller
// with the documented shape.
//
// One front door per op: the public op functions are not virtual. Each checks
// its arguments once, for every backend, and then calls the backend's private
// implementation (do_<op>): Unsupported for a dtype the backend does not take
// (supports()); InvalidArgument naming the op, the tensor and the backend for
// an undefined required tensor, a wrong dtype or shape, a tensor of another
// backend (CPU backends share host memory: any host tensor is fine there), or
// an output that overlaps an input or another output. Exact aliasing (the same
// memory and shape) is allowed where an op says so: the elementwise ops (relu,
// add, accumulate, dropout) may write over an input.
//
// Thread safety: a Backend is used by one thread at a time (its stream is one
// ordered queue). The registry functions are safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stoke/export.hpp"
#include "stoke/precision.hpp"
#include "stoke/tensor.hpp"

namespace stoke {

class Context;  // stoke/context.hpp

struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
};

struct Pool2dParams {
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;  // average pooling divides by the full window (padding counts)
};

struct BatchNormParams {
  float epsilon = 1e-5f;
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch
};

struct SgdParams {
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;  // L2 added to the gradient
  bool nesterov = false;
  // When set: a float32 tensor on the update's backend holding {lr}. The
  // update reads the rate from it when it executes, not from `lr` when it is
  // issued, so a replayed CUDA graph follows a schedule (nn::Optimizer::prepare
  // writes it before each step).
  const Tensor* scalars = nullptr;
};

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled_weight_decay = false;  // true: AdamW
  std::int64_t step = 1;                // 1-based, for bias correction
  // When set: a float32 tensor on the update's backend holding
  // {lr, 1 - beta1^step, 1 - beta2^step}, read when the update executes
  // (`lr` and `step` are then ignored); see SgdParams::scalars.
  const Tensor* scalars = nullptr;
};

// What a fused op applies to its result last.
enum class Activation : std::uint8_t { kIdentity, kRelu };

// Upsampling as PyTorch's F.interpolate with an output size: nearest takes
// source index floor(dst * (in / out)) (the ratio in float), bilinear is
// align_corners=False (source (dst + 0.5) * (in / out) - 0.5, clamped at 0).
enum class UpsampleMode : std::uint8_t { kNearest, kBilinear };

// Per-pixel losses of segmentation (pixel_cross_entropy_*, dice_loss_*).
struct PixelLossParams {
  // Pixels with this label count nowhere (loss, gradient, class sums);
  // a negative value that no label has (the default) ignores nothing.
  std::int32_t ignore_label = -100;
  float smooth = 0.0f;  // Dice: (2 I + smooth) / (P + G + smooth), as segmentation_models_pytorch
};

// Output spatial size of a convolution or pooling window.
STOKE_API std::int64_t conv_output_size(std::int64_t in, int kernel, int stride, int pad,
                                        int dilation = 1) noexcept;
// (N, C, P, Q) of a 2-D pooling of x (N, C, H, W); InvalidArgument naming `op`,
// x and the window for a bad rank, kernel, stride or padding (at most half the
// kernel), or a window that does not fit. Every backend's pooling agrees on it.
STOKE_API Shape pool2d_output_shape(const Shape& x, const Pool2dParams& p,
                                    const char* op = "pool2d");
// (N, K, P, Q) of a convolution of x (N, C, H, W) by w (K, C/groups, R, S);
// InvalidArgument naming x, w and the reason for a bad rank, parameter,
// channel/group mismatch, or a kernel that does not fit the padded input.
STOKE_API Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p);

// --- the op list ------------------------------------------------------------
// Every op entry point, once: X(enumerator, name, parameters, arguments).
// From it come the Op enum, to_string(Op), the per-backend virtuals
// (Backend::do_<name>) and their override declarations in every backend
// (STOKE_BACKEND_OP_OVERRIDES); lib/backend/ops.cpp checks statically that
// each front door below has the listed parameters. docs/architecture.md
// ("How to add an op") lists the places a new op touches.
#define STOKE_OPS(X)                                                                               \
  X(kConv2dForward, conv2d_forward,                                                                \
    (const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, const Conv2dParams& params), \
    (x, w, bias, y, params))                                                                       \
  X(kConv2dBackward, conv2d_backward,                                                              \
    (const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,       \
     const Conv2dParams& params),                                                                  \
    (x, w, dy, dx, dw, db, params))                                                                \
  X(kBatchNormForwardTraining, batch_norm_forward_training,                                        \
    (const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& running_mean,    \
     Tensor& running_var, Tensor& save_mean, Tensor& save_invstd, const BatchNormParams& params),  \
    (x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd, params))                \
  X(kBatchNormForwardInference, batch_norm_forward_inference,                                      \
    (const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,         \
     const Tensor& running_var, Tensor& y, const BatchNormParams& params),                         \
    (x, gamma, beta, running_mean, running_var, y, params))                                        \
  X(kBatchNormBackward, batch_norm_backward,                                                       \
    (const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,              \
     const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,                         \
     const BatchNormParams& params),                                                               \
    (x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, params))                             \
  X(kReluForward, relu_forward, (const Tensor& x, Tensor& y), (x, y))                              \
  X(kReluBackward, relu_backward, (const Tensor& y, const Tensor& dy, Tensor& dx), (y, dy, dx))    \
  X(kMaxPool2dForward, max_pool2d_forward,                                                         \
    (const Tensor& x, Tensor& y, const Pool2dParams& params), (x, y, params))                      \
  X(kMaxPool2dBackward, max_pool2d_backward,                                                       \
    (const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx, const Pool2dParams& params),  \
    (x, y, dy, dx, params))                                                                        \
  X(kAvgPool2dForward, avg_pool2d_forward,                                                         \
    (const Tensor& x, Tensor& y, const Pool2dParams& params), (x, y, params))                      \
  X(kAvgPool2dBackward, avg_pool2d_backward,                                                       \
    (const Tensor& dy, Tensor& dx, const Pool2dParams& params), (dy, dx, params))                  \
  X(kGlobalAvgPoolForward, global_avg_pool_forward, (const Tensor& x, Tensor& y), (x, y))          \
  X(kGlobalAvgPoolBackward, global_avg_pool_backward, (const Tensor& dy, Tensor& dx), (dy, dx))    \
  X(kAdd, add, (const Tensor& a, const Tensor& b, Tensor& y), (a, b, y))                           \
  X(kAccumulate, accumulate, (Tensor & dx, const Tensor& dy), (dx, dy))                            \
  X(kScale, scale, (Tensor & x, float alpha), (x, alpha))                                          \
  X(kAllFinite, all_finite, (const Tensor& x, Tensor& flag), (x, flag))                            \
  X(kLinearForward, linear_forward,                                                                \
    (const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y), (x, w, bias, y))            \
  X(kLinearBackward, linear_backward,                                                              \
    (const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db),      \
    (x, w, dy, dx, dw, db))                                                                        \
  X(kSoftmaxCrossEntropyForward, softmax_cross_entropy_forward,                                    \
    (const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& loss, Tensor& correct),    \
    (logits, labels, probs, loss, correct))                                                        \
  X(kSoftmaxCrossEntropyBackward, softmax_cross_entropy_backward,                                  \
    (const Tensor& probs, const Tensor& labels, Tensor& dlogits), (probs, labels, dlogits))        \
  X(kDropoutForward, dropout_forward,                                                              \
    (const Tensor& x, Tensor& y, Tensor& mask, float p, std::uint64_t seed),                       \
    (x, y, mask, p, seed))                                                                         \
  X(kDropoutBackward, dropout_backward, (const Tensor& dy, const Tensor& mask, Tensor& dx),        \
    (dy, mask, dx))                                                                                \
  X(kConv2dFusedForward, conv2d_fused_forward,                                                     \
    (const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual, Tensor& y,      \
     const Conv2dParams& params, Activation activation),                                           \
    (x, w, bias, residual, y, params, activation))                                                 \
  X(kAddRelu, add_relu, (const Tensor& a, const Tensor& b, Tensor& y), (a, b, y))                  \
  X(kBatchNormReluForwardTraining, batch_norm_relu_forward_training,                               \
    (const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& running_mean,    \
     Tensor& running_var, Tensor& save_mean, Tensor& save_invstd, const BatchNormParams& params),  \
    (x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd, params))                \
  X(kBatchNormReluBackward, batch_norm_relu_backward,                                              \
    (const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,                      \
     const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,               \
     Tensor& dbeta, const BatchNormParams& params),                                                \
    (x, y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, params))                          \
  X(kUpsample2dForward, upsample2d_forward, (const Tensor& x, Tensor& y, UpsampleMode mode),       \
    (x, y, mode))                                                                                  \
  X(kUpsample2dBackward, upsample2d_backward, (const Tensor& dy, Tensor& dx, UpsampleMode mode),   \
    (dy, dx, mode))                                                                                \
  X(kConcatChannelsForward, concat_channels_forward,                                               \
    (const Tensor& a, const Tensor& b, Tensor& y), (a, b, y))                                      \
  X(kConcatChannelsBackward, concat_channels_backward, (const Tensor& dy, Tensor& da, Tensor& db), \
    (dy, da, db))                                                                                  \
  X(kPixelCrossEntropyForward, pixel_cross_entropy_forward,                                        \
    (const Tensor& logits, const Tensor& labels, const Tensor& class_weights, Tensor& probs,       \
     Tensor& loss, const PixelLossParams& params),                                                 \
    (logits, labels, class_weights, probs, loss, params))                                          \
  X(kPixelCrossEntropyBackward, pixel_cross_entropy_backward,                                      \
    (const Tensor& probs, const Tensor& labels, const Tensor& class_weights, const Tensor& loss,   \
     Tensor& dlogits, const PixelLossParams& params),                                              \
    (probs, labels, class_weights, loss, dlogits, params))                                         \
  X(kDiceLossForward, dice_loss_forward,                                                           \
    (const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& sums, Tensor& loss,        \
     const PixelLossParams& params),                                                               \
    (logits, labels, probs, sums, loss, params))                                                   \
  X(kDiceLossBackward, dice_loss_backward,                                                         \
    (const Tensor& probs, const Tensor& labels, const Tensor& sums, Tensor& dlogits,               \
     const PixelLossParams& params),                                                               \
    (probs, labels, sums, dlogits, params))                                                        \
  X(kSgdUpdate, sgd_update,                                                                        \
    (Tensor & params, const Tensor& grads, Tensor& velocity, const SgdParams& p),                  \
    (params, grads, velocity, p))                                                                  \
  X(kAdamUpdate, adam_update,                                                                      \
    (Tensor & params, const Tensor& grads, Tensor& m, Tensor& v, const AdamParams& p),             \
    (params, grads, m, v, p))

#define STOKE_OP_ENUMERATOR(kind, name, params, args) kind,
enum class Op : std::uint8_t { STOKE_OPS(STOKE_OP_ENUMERATOR) };
#undef STOKE_OP_ENUMERATOR
// The entry point's name: "conv2d_forward", ...
STOKE_API const char* to_string(Op op) noexcept;

// Declares a backend's implementation of every op (inside its class body).
#define STOKE_OP_OVERRIDE(kind, name, params, args) void do_##name params override;
#define STOKE_BACKEND_OP_OVERRIDES STOKE_OPS(STOKE_OP_OVERRIDE)

enum class CopyKind : std::uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice };

struct MemoryStats {
  std::uint64_t in_use_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t allocations = 0;  // live allocations
};

class GpuBackend;        // stoke/cuda.hpp
class InferenceProgram;  // stoke/program.hpp
struct InferenceStep;
enum class ProgramLayout : std::uint8_t;

class STOKE_API Backend {
 public:
  virtual ~Backend();

  // The device surface (streams, pool figures, graph capture) of a GPU
  // backend; nullptr on a host backend. GpuBackend returns itself.
  virtual GpuBackend* gpu() noexcept { return nullptr; }

  // "cpu", "cuda:0", ...
  virtual std::string name() const = 0;
  // True when data() pointers of this backend's tensors are host-readable.
  virtual bool is_host() const noexcept = 0;

  // --- memory -------------------------------------------------------------
  // OutOfMemory if the backend's pool cannot serve the request.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void free(void* ptr, std::size_t bytes) noexcept = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak() = 0;
  // Workspace the backend keeps between ops (im2col buffers, per-thread
  // partial gradients): the most a conv2d forward or backward with these
  // shapes takes. Model memory plans add the maximum over their layers.
  virtual std::size_t conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                             const Conv2dParams& params) const = 0;
  // Frees cached workspace (it is allocated again on demand).
  virtual void release_workspace() = 0;

  // --- stream -------------------------------------------------------------
  // Copies bytes in stream order; host memory for kHostToDevice/kDeviceToHost.
  virtual void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) = 0;
  // Sets every element of a float32 tensor.
  virtual void fill(Tensor& tensor, float value) = 0;
  // Writes up to four values to the front of a float32 tensor in stream
  // order, without waiting for the device: the values are taken at the call
  // (host memory may be reused at once). For per-step scalars such as the
  // optimizer's learning rate. The default copies from the host.
  virtual void write_values(Tensor& tensor, std::span<const float> values);
  // Waits until all issued work has finished.
  virtual void synchronize() = 0;
  // Whether `op` takes tensors of `dtype` (its float tensors; labels are
  // int32). Every front door asks it and throws Unsupported naming the op,
  // the dtype and the backend when it does not. Both backends: float32 only.
  virtual bool supports(Op op, DType dtype) const noexcept;

  // --- inference ----------------------------------------------------------
  // A network's eval-mode forward as one program (stoke/program.hpp). The
  // default runs the steps through the front doors (make_plain_program);
  // a backend with layouts of its own keeps them between steps unless
  // `layout` is kPlain. `precision` is resolved (resolve_precision: never
  // kAuto) and one this backend supports; Unsupported otherwise.
  virtual std::unique_ptr<InferenceProgram> compile_inference(std::vector<InferenceStep> steps,
                                                              ProgramLayout layout,
                                                              Precision precision);
  // How compile_inference runs `precision` here (default: fp32 only).
  virtual PrecisionSupport inference_precision(Precision precision) const noexcept;

  // --- training precision --------------------------------------------------
  // How this backend's training convolutions run `precision` (default: fp32
  // only; the CPU: bf16 through oneDNN, docs/precision.md).
  virtual PrecisionSupport training_precision_support(Precision precision) const noexcept;
  // The precision conv2d_forward / conv2d_fused_forward / conv2d_backward
  // compute in from now on: kFp32, or kBf16 (x, w and dy rounded to bf16,
  // fp32 accumulation; y, dx, dw and db stay fp32 tensors). The tensors the
  // caller holds are fp32 either way. Unsupported for a precision whose
  // training_precision_support is kNone, and for kAuto (resolve it first).
  virtual void set_training_precision(Precision precision);
  virtual Precision training_precision() const noexcept { return Precision::kFp32; }
  // A backend of the same device and settings for another thread (its own
  // workspace), so that programs run on two threads at once; null where the
  // backend offers none (callers then take turns on this one).
  virtual std::unique_ptr<Backend> make_worker() const { return nullptr; }
  // Whether ops may use other threads of the arena (the default). Off, every
  // op runs on the calling thread alone with the same results (the CPU
  // backend keeps its chunking): for callers that bring the parallelism
  // themselves, such as several threads each on a worker. A no-op on GPU backends.
  virtual void set_parallel(bool /*parallel*/) noexcept {}

  // --- ops ----------------------------------------------------------------
  // x (N, C, H, W), w (K, C/groups, R, S), bias (K) or undefined, y (N, K, P, Q).
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                      const Conv2dParams& params);
  // dx may be undefined (first layer); dw is overwritten; db undefined or (K), overwritten.
  void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                       Tensor& db, const Conv2dParams& params);

  // Training mode: normalizes with the batch's statistics over (N, H, W),
  // updates running_mean/running_var (unbiased variance) and saves mean and
  // 1/sqrt(var + eps) of the batch (C) for the backward pass.
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   Tensor& y, Tensor& running_mean, Tensor& running_var,
                                   Tensor& save_mean, Tensor& save_invstd,
                                   const BatchNormParams& params);
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    Tensor& y, const BatchNormParams& params);
  // dgamma, dbeta (C) overwritten. `params` are the forward's (its epsilon:
  // cuDNN asks for the same one in both passes).
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta, const BatchNormParams& params);

  // y may be x (in place). Backward uses the output: dx = dy where y > 0.
  void relu_forward(const Tensor& x, Tensor& y);
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

  void max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params);
  // Gradient goes to the first maximum of each window (row-major order).
  void max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx,
                           const Pool2dParams& params);
  void avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params);
  void avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& params);
  // x (N, C, H, W) -> y (N, C).
  void global_avg_pool_forward(const Tensor& x, Tensor& y);
  void global_avg_pool_backward(const Tensor& dy, Tensor& dx);

  // y = a + b (residual add); y may alias a or b. Its backward is the identity
  // for both inputs, so callers pass dy on; accumulate(dx, dy) adds a second
  // gradient path: dx += dy.
  void add(const Tensor& a, const Tensor& b, Tensor& y);
  void accumulate(Tensor& dx, const Tensor& dy);
  // x *= alpha in place, in stream order (averaging accumulated gradients,
  // turning a batch-mean loss into a sum) without a host round trip.
  void scale(Tensor& x, float alpha);
  // flag (1) = 1 when every element of x is finite, 0 when any is NaN or
  // infinite: one pass over x, in stream order, without a host round trip
  // (the loss scaler's check of the gradients, stoke/loss_scale.hpp).
  void all_finite(const Tensor& x, Tensor& flag);

  // x (N, K), w (M, K), bias (M) or undefined, y (N, M): y = x w^T + b.
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);
  // dx may be undefined; dw, db overwritten.
  void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                       Tensor& db);

  // logits (N, C), labels int32 (N) in [0, C): probs (N, C) = softmax;
  // loss (1) = mean cross-entropy; correct (1) = number of rows whose argmax
  // (first maximum) is the label, as a float.
  void softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                     Tensor& loss, Tensor& correct);
  // dlogits = (probs - onehot(labels)) / N.
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, Tensor& dlogits);

  // Inverted dropout: mask = (u >= p) / (1 - p), y = x * mask, where u is a
  // counter-based uniform of (seed, element index), so every backend draws
  // the same mask for the same seed.
  void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p, std::uint64_t seed);
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx);

  // --- segmentation ops (docs/segmentation-ops.md) ----------------------------
  // x (N, C, H, W) -> y (N, C, P, Q), the size y has (UpsampleMode).
  void upsample2d_forward(const Tensor& x, Tensor& y, UpsampleMode mode);
  // dx (N, C, H, W) overwritten with the adjoint: each dy value spread back
  // over the source pixels it was interpolated from, with the same weights.
  void upsample2d_backward(const Tensor& dy, Tensor& dx, UpsampleMode mode);
  // a (N, Ca, H, W), b (N, Cb, H, W) -> y (N, Ca + Cb, H, W): a's channels, then b's.
  void concat_channels_forward(const Tensor& a, const Tensor& b, Tensor& y);
  // dy (N, Ca + Cb, H, W) split back into da and db (either may be undefined).
  void concat_channels_backward(const Tensor& dy, Tensor& da, Tensor& db);
  // logits (N, K, H, W), labels int32 (N, H, W) in [0, K) or the ignore
  // label, class_weights (K) or undefined (all 1): probs (N, K, H, W) =
  // softmax over K per pixel; loss (2) = {sum of w[y] (-log p_y) / W, W},
  // W the sum of w[y] over the pixels not ignored (PyTorch's cross_entropy
  // with weight, ignore_index, reduction 'mean'; 0 loss when W = 0, where
  // PyTorch gives NaN). A label outside both is InvalidArgument on the CPU, a
  // NaN loss on a GPU.
  void pixel_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                   const Tensor& class_weights, Tensor& probs, Tensor& loss,
                                   const PixelLossParams& params);
  // dlogits = w[y] (probs - onehot(y)) / W per pixel not ignored, 0 elsewhere
  // (loss: the forward's, for W).
  void pixel_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                    const Tensor& class_weights, const Tensor& loss,
                                    Tensor& dlogits, const PixelLossParams& params);
  // Soft Dice over softmax probabilities (segmentation_models_pytorch's
  // DiceLoss, multiclass, from logits): per class c over the batch's pixels not
  // ignored, I = sum p_c g_c, P = sum p_c, G = sum g_c (g the one-hot label);
  // sums (K, 3) = {I, P, G}; loss (1) = mean over the K classes of
  // 1 - (2 I + smooth) / max(P + G + smooth, 1e-7), counted 0 for a class with G = 0.
  // probs (N, K, H, W) = the softmax; labels as pixel_cross_entropy_forward.
  void dice_loss_forward(const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& sums,
                         Tensor& loss, const PixelLossParams& params);
  // dlogits (N, K, H, W) of the forward's loss, through the softmax.
  void dice_loss_backward(const Tensor& probs, const Tensor& labels, const Tensor& sums,
                          Tensor& dlogits, const PixelLossParams& params);

  // --- fused ops (one output pass; the same arithmetic as the plain ops they
  // replace, up to rounding) ------------------------------------------------
  // y = activation(conv(x, w) + bias + residual): the eval-mode convolution
  // of the inference plan, batch norm folded into w and bias by the caller.
  // bias (K) and residual (y's shape) may be undefined; y overlaps neither.
  void conv2d_fused_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                            const Tensor& residual, Tensor& y, const Conv2dParams& params,
                            Activation activation);
  // y = max(a + b, 0), a residual block's end; y may alias a or b.
  void add_relu(const Tensor& a, const Tensor& b, Tensor& y);
  // batch_norm_forward_training, then y = max(y, 0) in the same pass.
  void batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                        Tensor& y, Tensor& running_mean, Tensor& running_var,
                                        Tensor& save_mean, Tensor& save_invstd,
                                        const BatchNormParams& params);
  // batch_norm_backward of dy masked to y > 0: y is the fused forward's
  // output, dy the gradient at it.
  void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                const Tensor& gamma, const Tensor& save_mean,
                                const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta, const BatchNormParams& params);

  // One flat sweep over a parameter block: params, grads, and the optimizer
  // state (velocity; first and second moments) have the same element count.
  void sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity, const SgdParams& p);
  void adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const AdamParams& p);

 protected:
  Backend() = default;

 private:
  // The implementations behind the front doors, one per op of STOKE_OPS,
  // declared in each backend with STOKE_BACKEND_OP_OVERRIDES. They run only
  // after the front door has validated every argument (shapes, dtypes, the
  // tensors' backend, aliasing, parameters), so they check nothing of that.
#define STOKE_OP_PURE_VIRTUAL(kind, name, params, args) virtual void do_##name params = 0;
  STOKE_OPS(STOKE_OP_PURE_VIRTUAL)
#undef STOKE_OP_PURE_VIRTUAL
};

// --- registry ---------------------------------------------------------------
// The registry holds factories by name, and the shared backend it made from
// each with init()'s context (find_backend, default_backend). The CPU
// backend is always registered under "cpu". The CUDA plugin registers
// "cuda:<index>" for every device it finds (a shared backend for those
// STOKE_GPU_DEVICE selects). make_backend(context, name) (stoke/runtime.hpp)
// makes a backend of a context's own from a factory.
using BackendFactory = std::function<std::unique_ptr<Backend>(const Context&)>;

STOKE_API Backend& cpu_backend();
// How the CPU backend's matrix products run in this process (stoke info):
// "OpenBLAS (Haswell kernels)", or oneDNN's sgemm where OpenBLAS chose
// kernels older than the CPU ("oneDNN sgemm (OpenBLAS chose its Prescott
// kernels on a CPU with AVX-512: ...)").
STOKE_API std::string cpu_matrix_route();
// The shared backend of that name; nullptr if there is none.
STOKE_API Backend* find_backend(const std::string& name);
// A backend made by the application, shared under its name() (no factory:
// make_backend cannot make another). InvalidArgument if the name is taken.
STOKE_API void register_backend(std::unique_ptr<Backend> backend);
// A factory under `name`; its shared backend is made now, with init()'s
// context (a default one before init()). InvalidArgument if the name is taken.
STOKE_API void register_backend_factory(const std::string& name, BackendFactory factory);
// A backend of `context`'s own from the factory `name` ("cpu", "cuda:<i>", or
// one an application registered); InvalidArgument naming the factories there
// are when none has that name.
STOKE_API std::unique_ptr<Backend> make_backend(const Context& context, const std::string& name);
// The names of the shared backends.
STOKE_API std::vector<std::string> backend_names();
// The first registered GPU backend, else the CPU one.
STOKE_API Backend& default_backend();

// The precision `backend`'s inference runs for `requested`: kAuto is bf16
// where the backend runs it natively and measurably faster than fp32
// (measured_time_ratio at most kAutoTimeRatio), else fp32; an explicit bf16 or
// fp16 it cannot run is Unsupported naming the backend and why; an emulated
// one is run with a warning that it is slower than fp32.
STOKE_API Precision resolve_precision(Backend& backend, Precision requested);

// The time of three 3x3 convolutions on one image in `precision` over their
// time in fp32 on `backend` (medians of interleaved rounds, a few ms each):
// measured at the first call for a backend name and precision in a process,
// then remembered. `precision` must be one the backend's inference runs.
STOKE_API double measured_time_ratio(Backend& backend, Precision precision);
// kAuto takes a precision below fp32 only where it takes at most this share
// of fp32's time.
inline constexpr double kAutoTimeRatio = 0.9;
// Whether a model file gated for `gated` (stoke quantize) runs in it here
// without being asked: where `backend` runs it natively and, for bf16,
// measurably faster than fp32 (as kAuto decides); int8 needs no measure.
STOKE_API bool gated_precision_pays(Backend& backend, Precision gated);

// Sets `backend`'s training precision for the scope and restores the previous
// one after (the model file's fp32 reference logits inside a bf16 fit).
class STOKE_API TrainingPrecisionScope {
 public:
  TrainingPrecisionScope(Backend& backend, Precision precision);
  ~TrainingPrecisionScope();
  TrainingPrecisionScope(const TrainingPrecisionScope&) = delete;
  TrainingPrecisionScope& operator=(const TrainingPrecisionScope&) = delete;

 private:
  Backend& backend_;
  Precision previous_;
};

// A CPU backend of its own (not registered) whose allocations are capped at
// memory_cap bytes in use (0 = no cap): over the cap, allocate() throws
// OutOfMemory naming the cap, the request and the memory in use. For
// applications that bound the trainer's host memory, and for tests.
STOKE_API std::unique_ptr<Backend> make_cpu_backend(std::uint64_t memory_cap);

}  // namespace stoke
