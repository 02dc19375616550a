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
//
// Activations are fp32 or bf16 (`Elem`): in bf16 the weights are reordered to
// bf16 once, bias and accumulation stay fp32 (oneDNN's bf16 kernels), and
// pointers below point at elements of that type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stoke/backend.hpp"

namespace stoke::cpu::blocked {

// True when `backend` is the CPU backend and stoke was built with oneDNN.
STOKE_INTERNAL bool available(Backend& backend) noexcept;

// The element type of the activations and weights a program computes on.
enum class Elem : std::uint8_t { kF32, kBf16 };
inline std::size_t elem_size(Elem e) noexcept {
  return e == Elem::kF32 ? 4 : 2;
}
// How oneDNN runs bf16 convolutions on this machine under its current
// instruction-set cap: 2 with AVX512-BF16 or AMX instructions, 1 emulated on
// AVX-512 without them, 0 not at all (AVX2 and below, or no oneDNN).
STOKE_INTERNAL int bf16_support() noexcept;
// The effective instruction set oneDNN runs (its cap included), for messages.
STOKE_INTERNAL std::string isa_name();

// Channels per block of the layout (16 or 8). An (N, C, H, W) activation
// takes N * ceil(C / block) * block * H * W floats, the padding channels zero.
STOKE_INTERNAL int block_channels();
STOKE_INTERNAL std::int64_t blocked_floats(const Shape& shape);

// x (N, C, H, W) plain fp32 -> blocked `elem` at `to` (blocked_floats(x.shape())
// elements); with `plain`, NCHW `elem` at `to` (x.numel() elements).
STOKE_INTERNAL void to_blocked(Backend& backend, const Tensor& x, void* to, Elem elem,
                               bool plain = false);
// Blocked `elem` at `from` -> y (N, C, H, W) plain fp32.
STOKE_INTERNAL void to_plain(Backend& backend, const void* from, Tensor& y, Elem elem);

// Max pooling (padding never wins, as Pool2d) from blocked x (`x_shape`) at
// `from` to blocked y at `to` (pool_blocked.cpp); split as a convolution's
// forward. `nhwc`: both in NHWC instead (the int8 program's fp32 activations
// between its convolutions), split over images or one image's rows.
STOKE_INTERNAL void max_pool(Backend& backend, const Shape& x_shape, const void* from, void* to,
                             const Pool2dParams& params, Elem elem, bool nhwc = false);
// The same over NHWC 8-bit codes (u8 or s8): the maximum commutes with the
// quantizer, so pooling an int8 program's codes gives the codes of the pool.
STOKE_INTERNAL void max_pool_codes(Backend& backend, const Shape& x_shape, const void* from,
                                   void* to, const Pool2dParams& params, bool is_unsigned);

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
  void set_weights(const Tensor& w, const Tensor& bias, const Conv2dParams& params, bool relu,
                   Elem elem = Elem::kF32);

  // x: shape `x_shape`, blocked, or plain NCHW when x_plain (a network input
  // with few channels, which oneDNN's first-layer kernels read as it is).
  // y: blocked, conv2d_output_shape's shape; when accumulate, y holds the
  // residual (blocked) on entry and y must not overlap x. Both of set_weights' elem.
  void forward(Backend& backend, const Shape& x_shape, const void* x, bool x_plain, void* y,
               bool accumulate);

  // oneDNN's implementation names of the primitives made so far (the bench's profile).
  std::string implementations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoke::cpu::blocked
