// int8 eval-mode convolutions (Precision::kInt8, docs/precision.md): post-
// training static quantization through oneDNN's int8 kernels, one layer at a
// time. The fp32 input (the blocked program's activation, conv2d_blocked.hpp)
// is quantized with its calibrated per-tensor scale — to u8 when the
// calibrated range has no negative value (after a ReLU), else to s8 — the
// weights to s8 with one scale per output channel, the convolution sums in
// int32 and its output pass dequantizes, adds the bias (and the residual,
// and applies the ReLU) in fp32. Where one convolution alone reads another's
// output (inside a residual block's chain) the output pass writes the next
// layer's 8-bit codes instead (Layout::kCodes), and the next layer reads them
// as they are.
//
// The quantization rules live here, once, and both the oneDNN path and the
// naive reference (conv2d_int8_naive.cpp) use them:
//   input:   x_q = clamp(round_half_even(x * (1 / s_x)), 0..255 or -127..127)
//            (0..127 without VNNI: input_quantization's reduce_range)
//   weights: w_q = clamp(round_half_even(w / s_w[k]), -127..127),
//            s_w[k] = max |w[k, ...]| / 127 (1 for an all-zero channel)
//   output:  y = (float(sum x_q * w_q) + bias[k] / (s_x * s_w[k])) * (s_x * s_w[k])
//            [+ residual] [relu]
// (oneDNN 2.x applies its output scale after the bias, hence the divided bias.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/conv2d_blocked.hpp"
#include "stoke/program.hpp"

namespace stoke::cpu::int8 {

// How one convolution's input is quantized.
struct InputQuantization {
  float scale = 1.0f;  // s_x: one step of the 8-bit code, in x's units
  bool is_unsigned = false;
  // The same codes for the same input: one quantization serves both readers.
  bool operator==(const InputQuantization&) const = default;
};
// From a calibrated range: u8 over [0, max] when min >= 0, else s8 over
// [-max|.|, max|.|]; a range of zero width gets scale 1. `reduce_range`
// (kernels without VNNI, support() < 2): u8 codes stop at 127, so that
// vpmaddubsw's 16-bit sums of two u8 * s8 products cannot saturate.
// InvalidArgument for a range with a non-finite end or min > max.
STOKE_INTERNAL InputQuantization input_quantization(const ActivationRange& range,
                                                    bool reduce_range = false);
STOKE_INTERNAL std::uint8_t quantize_u8(float x, float inverse_scale) noexcept;
STOKE_INTERNAL std::int8_t quantize_s8(float x, float inverse_scale) noexcept;

// s_w per output channel of w (K, ...), `per` = C * R * S values each.
STOKE_INTERNAL std::vector<float> weight_scales(const float* w, std::int64_t k, std::int64_t per);
// w_q as integer-valued floats (exactly representable), the same layout as w.
STOKE_INTERNAL std::vector<float> quantize_weights(const float* w, std::int64_t k, std::int64_t per,
                                                   const std::vector<float>& scales);

// The naive reference: the rules above with int64 sums, in plain loops.
// x (N, C, H, W), w (K, C, R, S), bias (K) or undefined, residual like y or
// null, y (N, K, P, Q): host tensors (the CPU backend's). groups 1.
STOKE_INTERNAL void conv2d_reference(const Tensor& x, const Tensor& w, const Tensor& bias,
                                     const Tensor* residual, Tensor& y, const Conv2dParams& params,
                                     bool relu, const ActivationRange& input_range,
                                     bool reduce_range = false);

// How oneDNN runs int8 convolutions under its current instruction-set cap:
// 2 with VNNI (AVX512-VNNI, AVX-VNNI or AMX: exact int32 sums), 1 without
// (AVX2 / AVX-512: vpmaddubsw, whose 16-bit pair sums may saturate, and s8
// inputs halve the weights: close to the reference, not equal), 0 not at all.
STOKE_INTERNAL int support() noexcept;

// Where an int8 convolution reads its input or writes its output.
enum class Layout : std::uint8_t {
  kPlain,    // fp32 NCHW (a network input: input only)
  kBlocked,  // fp32 in the blocked layout (conv2d_blocked.hpp)
  kNhwc,     // fp32 NHWC
  kCodes,    // NHWC 8-bit codes: an input quantized with this convolution's own
             // input quantization; an output quantized with the next one's
             // (set_output_codes): the two layers chain without fp32 between them
};

// A residual a convolution adds from a buffer of its own (NHWC, shaped like
// its output; oneDNN's binary post-op) rather than from its output's fp32
// contents: 8-bit codes quantized as `codes` (a block's identity shortcut
// reading the block's input codes, added as ONNX Runtime's QLinearAdd adds
// its 8-bit inputs), or fp32 (`codes` empty: a shortcut convolution's
// output). Unlike `accumulate` it lets the output be codes.
struct Residual {
  const void* data = nullptr;
  std::optional<InputQuantization> codes;
};

// One convolution (groups 1) of int8 inference:
// y = relu?(deq(conv(q(x), w_q)) + bias + y_before?), written as fp32 or, as
// kCodes, quantized again for the one convolution that reads it.
class STOKE_INTERNAL Conv {
 public:
  Conv();
  ~Conv();
  Conv(Conv&&) noexcept;
  Conv& operator=(Conv&&) noexcept;

  // As blocked::Conv::set_weights (w and bias read now: the quantized
  // weights are made here), with the input's calibrated range.
  void set_weights(const Tensor& w, const Tensor& bias, const Conv2dParams& params, bool relu,
                   const ActivationRange& input_range);
  // This convolution's input quantization (set_weights).
  InputQuantization input() const noexcept;
  // The quantization a kCodes output is written in (the consumer's input()):
  // the codes equal quantize_u8 / quantize_s8 of the fp32 output.
  void set_output_codes(const InputQuantization& next);
  // x (`x_shape`) in layout `in` -> y in layout `out` (not kPlain; kCodes
  // after set_output_codes and without `accumulate`); `accumulate` adds y's
  // fp32 contents (the residual) before the ReLU, `residual` (not with
  // `accumulate`; kNhwc or kCodes outputs) adds its buffer's.
  void forward(Backend& backend, const Shape& x_shape, const void* x, Layout in, void* y,
               Layout out, bool accumulate, const Residual* residual = nullptr);
  // x (`x_shape`, fp32 in layout `in`) -> its NHWC codes in this
  // convolution's input quantization at `to` (what forward does first): for
  // two convolutions of one input quantized alike, a block's first and its
  // shortcut, to quantize once.
  void quantize(Backend& backend, const Shape& x_shape, const void* x, Layout in, void* to) const;
  std::string implementations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// fp32 NHWC x (`shape`) at `from` -> the blocked layout at `to`.
STOKE_INTERNAL void nhwc_to_blocked(Backend& backend, const Shape& shape, const void* from,
                                    void* to);

}  // namespace stoke::cpu::int8
