// The per-instruction-set row kernels behind Resampler and the jitter. Each
// instruction set compiles kernels_impl.hpp once in its own translation unit
// (kernels_<isa>.cpp, flags in module.cmake) into its own namespace, and
// exposes a table of function pointers; the scalar table is the reference the
// SIMD ones are tested against. Arithmetic is ordered identically in every
// table (multiply then add, no FMA contraction), so every table's results
// are bit-identical to the scalar table's.
//
// The vertical pass runs in fixed point (like OpenCV's uint8 resizers): rows
// are widened to pixel * 128, multiplied by Q15 weights with rounding
// (mulhrs) and summed with saturation into int16, 32 lanes per AVX-512
// register. The horizontal weights carry the 1/128. Error against exact
// arithmetic: at most (taps + 1) / 128 of a pixel step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/float16.hpp"
#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke::image_detail {

struct RowKernels {
  // acc[i] = sat16(sum_k mulhrs(rows[k][i] << 7, weights[k])), i < n (k < taps);
  // mulhrs(a, b) = (a * b + 2^14) >> 15. taps == 1 copies rows[0][i] << 7 exactly.
  void (*vertical)(const std::uint8_t* const* rows, const std::int16_t* weights, int taps,
                   std::size_t n, std::int16_t* acc);
  // out[j] = sum_k weights[k * weight_stride + j] * src[index[j] + k * tap_step], j < n.
  void (*horizontal)(const std::int16_t* src, const std::int32_t* index, const float* weights,
                     std::size_t weight_stride, int taps, int tap_step, std::size_t n, float* out);
  // horizontal followed by store_f32 in one pass (no row round trip):
  // out[j] = (sum_k ...) * scale + bias.
  void (*horizontal_affine)(const std::int16_t* src, const std::int32_t* index,
                            const float* weights, std::size_t weight_stride, int taps, int tap_step,
                            std::size_t n, float scale, float bias, float* out);
  // Three-channel horizontal pass without gathers: for pixel x < n and
  // channel c < 3, out[3x + c] = sum_k weights[k * weight_stride + x] *
  // src[start3[x] + 3k + c]. Reads one value past the last source pixel (src
  // needs 4 values of padding) and may write out[3n] (out needs 1 float).
  void (*horizontal_rgb)(const std::int16_t* src, const std::int32_t* start3, const float* weights,
                         std::size_t weight_stride, int taps, std::size_t n, float* out);
  // Deinterleaves an RGB float row into three planes, applying per-channel
  // scale/bias: plane_c[x] = row[3x + c] * scale[c] + bias[c].
  void (*store_planes_rgb)(const float* row, std::size_t n, const float* scale, const float* bias,
                           float* plane0, float* plane1, float* plane2);
  // out[j] = round_even(clamp(v[j], 0, 255)).
  void (*store_u8)(const float* v, std::size_t n, std::uint8_t* out);
  // out[j] = v[j] * scale + bias as float / half / bfloat16 bits.
  void (*store_f32)(const float* v, std::size_t n, float scale, float bias, float* out);
  void (*store_f16)(const float* v, std::size_t n, float scale, float bias, std::uint16_t* out);
  void (*store_bf16)(const float* v, std::size_t n, float scale, float bias, std::uint16_t* out);
  // p[j] = round_even(clamp(p[j] * alpha + beta, 0, 255)).
  void (*affine_u8)(std::uint8_t* p, std::size_t n, float alpha, float beta);
  // The 16-bit vertical pass, in float: out[i] = sum_k weights[k] * rows[k][i]
  // (k in order, multiply then add), i < n.
  void (*vertical_u16)(const std::uint16_t* const* rows, const float* weights, int taps,
                       std::size_t n, float* out);
};

const RowKernels* row_kernels_scalar();
const RowKernels* row_kernels_sse4();  // nullptr when not built for x86-64
const RowKernels* row_kernels_avx2();
const RowKernels* row_kernels_avx512();

// The table for `level`, never above what this CPU runs (clamped down).
STOKE_INTERNAL const RowKernels& row_kernels(SimdLevel level);

// IEEE conversions used by the scalar path (round to nearest even).
using detail::bfloat16_to_float;
using detail::float_to_bfloat16;
using detail::float_to_half;
using detail::half_to_float;

}  // namespace stoke::image_detail
