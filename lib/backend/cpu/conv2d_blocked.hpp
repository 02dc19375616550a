// Eval-mode convolutions on activations kept in oneDNN's blocked layout
// between layers (lib/nn/fused_inference.cpp): nChw16c where oneDNN runs
// AVX-512, nChw8c otherwise, so its direct (brgconv / jit) kernels run without
// a reorder per convolution. Bias, the residual add (oneDNN's `sum` post-op,
// in place on the residual's buffer) and the ReLU (`eltwise_relu`) are applied
// in the convolution's own output pass.
//
// Threads as in conv2d_dnnl.hpp: one OpenMP thread per primitive inside the
// backend's chunks; a batch splits over images, one image over blocks of
// output channels (each part reads the whole input; parts of at least 32
// channels). The split depends on the shape only (at most 8 parts), so
// results are the same bits for any thread count. Weights are reordered once
// per layout a primitive asks for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stoke/backend.hpp"

namespace stoke::cpu::blocked {

// True when `backend` is the CPU backend and stoke was built with oneDNN.
STOKE_INTERNAL bool available(Backend& backend) noexcept;

// Channels per block of the layout (16 or 8). An (N, C, H, W) activation
// takes N * ceil(C / block) * block * H * W floats, the padding channels zero.
STOKE_INTERNAL int block_channels();
STOKE_INTERNAL std::int64_t blocked_floats(const Shape& shape);

// x (N, C, H, W) plain -> blocked at `to` (blocked_floats(x.shape()) floats).
STOKE_INTERNAL void to_blocked(Backend& backend, const Tensor& x, float* to);
// Blocked at `from` -> y (N, C, H, W) plain.
STOKE_INTERNAL void to_plain(Backend& backend, const float* from, Tensor& y);

// Max pooling (padding never wins, as Pool2d) from blocked x (`x_shape`) at
// `from` to blocked y at `to` (pool_blocked.cpp); split as a convolution's forward.
STOKE_INTERNAL void max_pool(Backend& backend, const Shape& x_shape, const float* from, float* to,
                             const Pool2dParams& params);

// One convolution (groups 1) of eval-mode inference:
// y = relu?(conv(x, w) + bias + y_before?).
class STOKE_INTERNAL Conv {
 public:
  Conv();
  ~Conv();
  Conv(Conv&&) noexcept;
  Conv& operator=(Conv&&) noexcept;

  // w (K, C, R, S) and bias (K), plain, host memory (the CPU backend's
  // tensors), read when a primitive first needs them: they must stay alive
  // and unchanged; call again after they change (drops the reordered copies).
  // InvalidArgument when params.groups != 1.
  void set_weights(const Tensor& w, const Tensor& bias, const Conv2dParams& params, bool relu);

  // x: shape `x_shape`, blocked, or plain NCHW when x_plain (a network input
  // with few channels, which oneDNN's first-layer kernels read as it is).
  // y: blocked, conv2d_output_shape's shape; when accumulate, y holds the
  // residual (blocked) on entry and y must not overlap x.
  void forward(Backend& backend, const Shape& x_shape, const float* x, bool x_plain, float* y,
               bool accumulate);

  // oneDNN's implementation names of the primitives made so far (the bench's profile).
  std::string implementations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoke::cpu::blocked
