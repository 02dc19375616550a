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
// with the documented shape; a mismatch is InvalidArgument.
//
// Thread safety: a Backend is used by one thread at a time (its stream is one
// ordered queue). The registry functions are safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stoke/export.hpp"
#include "stoke/tensor.hpp"

namespace stoke {

enum class Op : std::uint8_t {
  kConv2d,
  kBatchNorm,
  kRelu,
  kMaxPool2d,
  kAvgPool2d,
  kGlobalAvgPool,
  kAdd,
  kLinear,
  kSoftmaxCrossEntropy,
  kDropout,
  kSgdUpdate,
  kAdamUpdate,
};
STOKE_API const char* to_string(Op op) noexcept;

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

// Output spatial size of a convolution or pooling window.
STOKE_API std::int64_t conv_output_size(std::int64_t in, int kernel, int stride, int pad,
                                        int dilation = 1) noexcept;
// (N, C, P, Q) of a 2-D pooling of x (N, C, H, W); InvalidArgument naming `op`,
// x and the window for a bad rank, kernel, stride or padding (at most half the
// kernel), or a window that does not fit. Every backend's pooling agrees on it.
STOKE_API Shape pool2d_output_shape(const Shape& x, const Pool2dParams& p, const char* op = "pool2d");

enum class CopyKind : std::uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice };

struct MemoryStats {
  std::uint64_t in_use_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t allocations = 0;  // live allocations
};

class GpuBackend;  // stoke/cuda.hpp

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
  virtual bool supports(Op op, DType dtype) const noexcept = 0;

  // --- ops ----------------------------------------------------------------
  // x (N, C, H, W), w (K, C/groups, R, S), bias (K) or undefined, y (N, K, P, Q).
  virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                              const Conv2dParams& params) = 0;
  // dx may be undefined (first layer); dw is overwritten; db undefined or (K), overwritten.
  virtual void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                               Tensor& dw, Tensor& db, const Conv2dParams& params) = 0;

  // Training mode: normalizes with the batch's statistics over (N, H, W),
  // updates running_mean/running_var (unbiased variance) and saves mean and
  // 1/sqrt(var + eps) of the batch (C) for the backward pass.
  virtual void batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                           const Tensor& beta, Tensor& y, Tensor& running_mean,
                                           Tensor& running_var, Tensor& save_mean,
                                           Tensor& save_invstd,
                                           const BatchNormParams& params) = 0;
  virtual void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, const Tensor& running_mean,
                                            const Tensor& running_var, Tensor& y,
                                            const BatchNormParams& params) = 0;
  // dgamma, dbeta (C) overwritten.
  virtual void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& save_mean, const Tensor& save_invstd,
                                   Tensor& dx, Tensor& dgamma, Tensor& dbeta) = 0;

  // y may be x (in place). Backward uses the output: dx = dy where y > 0.
  virtual void relu_forward(const Tensor& x, Tensor& y) = 0;
  virtual void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;

  virtual void max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) = 0;
  // Gradient goes to the first maximum of each window (row-major order).
  virtual void max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                   Tensor& dx, const Pool2dParams& params) = 0;
  virtual void avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) = 0;
  virtual void avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& params) = 0;
  // x (N, C, H, W) -> y (N, C).
  virtual void global_avg_pool_forward(const Tensor& x, Tensor& y) = 0;
  virtual void global_avg_pool_backward(const Tensor& dy, Tensor& dx) = 0;

  // y = a + b (residual add); y may alias a or b. Its backward is the identity
  // for both inputs, so callers pass dy on; accumulate(dx, dy) adds a second
  // gradient path: dx += dy.
  virtual void add(const Tensor& a, const Tensor& b, Tensor& y) = 0;
  virtual void accumulate(Tensor& dx, const Tensor& dy) = 0;
  // x *= alpha in place, in stream order (averaging accumulated gradients,
  // turning a batch-mean loss into a sum) without a host round trip.
  virtual void scale(Tensor& x, float alpha) = 0;

  // x (N, K), w (M, K), bias (M) or undefined, y (N, M): y = x w^T + b.
  virtual void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                              Tensor& y) = 0;
  // dx may be undefined; dw, db overwritten.
  virtual void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                               Tensor& dw, Tensor& db) = 0;

  // logits (N, C), labels int32 (N) in [0, C): probs (N, C) = softmax;
  // loss (1) = mean cross-entropy; correct (1) = number of rows whose argmax
  // (first maximum) is the label, as a float.
  virtual void softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                             Tensor& probs, Tensor& loss, Tensor& correct) = 0;
  // dlogits = (probs - onehot(labels)) / N.
  virtual void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                              Tensor& dlogits) = 0;

  // Inverted dropout: mask = (u >= p) / (1 - p), y = x * mask, where u is a
  // counter-based uniform of (seed, element index), so every backend draws
  // the same mask for the same seed.
  virtual void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                               std::uint64_t seed) = 0;
  virtual void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) = 0;

  // One flat sweep over a parameter block: params, grads, and the optimizer
  // state (velocity; first and second moments) have the same element count.
  virtual void sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                          const SgdParams& p) = 0;
  virtual void adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                           const AdamParams& p) = 0;
};

// --- registry ---------------------------------------------------------------
// The CPU backend is always registered under "cpu". The CUDA plugin registers
// "cuda:<index>" when it loads and finds a device.
STOKE_API Backend& cpu_backend();
// nullptr if no backend of that name is registered.
STOKE_API Backend* find_backend(const std::string& name);
// InvalidArgument if the name is taken.
STOKE_API void register_backend(std::unique_ptr<Backend> backend);
STOKE_API std::vector<std::string> backend_names();
// The first registered GPU backend, else the CPU one.
STOKE_API Backend& default_backend();

// A CPU backend of its own (not registered) whose allocations are capped at
// memory_cap bytes in use (0 = no cap): over the cap, allocate() throws
// OutOfMemory naming the cap, the request and the memory in use. For
// applications that bound the trainer's host memory, and for tests.
STOKE_API std::unique_ptr<Backend> make_cpu_backend(std::uint64_t memory_cap);

}  // namespace stoke
