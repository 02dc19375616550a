// Row kernels, compiled once per instruction set. The including file defines
// STOKE_ISA (0 scalar, 1 SSE4.1, 2 AVX2, 3 AVX-512) and STOKE_ISA_NS (a
// namespace unique to that translation unit, so no inline function compiled
// with wider instructions can be picked by the linker for another level).
//
// The vector loops use xsimd batches for the arithmetic; the three things
// xsimd 8.1 does not offer fast (uint8 -> float widening load, float gather on
// AVX2, float -> uint8 / half / bfloat16 narrowing stores) are one intrinsic
// each per instruction set. Every vector loop has a scalar tail that performs
// the same operations in the same order.
#pragma once

#include <cmath>
#include <cstring>

#include "image/kernels.hpp"

#if STOKE_ISA > 0
#include <immintrin.h>

#include <xsimd/xsimd.hpp>
#endif

namespace stoke::image_detail::STOKE_ISA_NS {
namespace {

inline float clamp_u8_range(float v) {
  return v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
}
inline std::uint8_t round_u8(float v) {
  return static_cast<std::uint8_t>(std::nearbyint(clamp_u8_range(v)));
}

#if STOKE_ISA == 1
using Arch = xsimd::sse4_1;
#elif STOKE_ISA == 2
using Arch = xsimd::fma3<xsimd::avx2>;
#elif STOKE_ISA == 3
using Arch = xsimd::avx512bw;
#endif

#if STOKE_ISA > 0
using FloatBatch = xsimd::batch<float, Arch>;
constexpr std::size_t kLanes = FloatBatch::size;

inline FloatBatch load_u8(const std::uint8_t* p) {
#if STOKE_ISA == 1
  std::int32_t word;
  std::memcpy(&word, p, 4);
  return _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(word)));
#elif STOKE_ISA == 2
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  return _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
}

// Eight (SSE4.1: four, AVX-512: sixteen) uint16 values widened to float.
inline FloatBatch load_u16(const std::uint16_t* p) {
#if STOKE_ISA == 1
  return _mm_cvtepi32_ps(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#elif STOKE_ISA == 2
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  return _mm512_cvtepi32_ps(
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
}

// Element loads, not the gather instructions: on AMD Zen 4 (and older Intel
// cores) vgatherdps is slower than scalar loads + inserts (measured in
// bench/pipeline_bench.cpp: the horizontal pass ran ~1.4x faster this way).
inline FloatBatch gather(const std::int16_t* base, const std::int32_t* index) {
  auto at = [&](int i) { return static_cast<float>(base[index[i]]); };
#if STOKE_ISA == 1
  return _mm_setr_ps(at(0), at(1), at(2), at(3));
#elif STOKE_ISA == 2
  return _mm256_setr_ps(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
#else
  return _mm512_setr_ps(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9),
                        at(10), at(11), at(12), at(13), at(14), at(15));
#endif
}

// Four int16 values (8 bytes) into the low half of a register.
inline __m128i load4(const std::int16_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

// Rounds to nearest even (the default MXCSR mode) and saturates to [0, 255].
inline void store_u8_batch(FloatBatch v, std::uint8_t* out) {
#if STOKE_ISA == 1
  const __m128i i32 = _mm_cvtps_epi32(v);
  const __m128i u16 = _mm_packus_epi32(i32, i32);
  const std::int32_t word = _mm_cvtsi128_si32(_mm_packus_epi16(u16, u16));
  std::memcpy(out, &word, 4);
#elif STOKE_ISA == 2
  const __m256i i32 = _mm256_cvtps_epi32(v);
  const __m128i u16 =
      _mm_packus_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(u16, u16));
#else
  const __m512i i32 = _mm512_max_epi32(_mm512_cvtps_epi32(v), _mm512_setzero_si512());
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtusepi32_epi8(i32));
#endif
}

// Values are below 2^16 after the bfloat16 shift, so unsigned packing is exact.
inline void store_u16_from_u32(xsimd::batch<std::uint32_t, Arch> v, std::uint16_t* out) {
#if STOKE_ISA == 1
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi32(v, v));
#elif STOKE_ISA == 2
  const __m256i x = v;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)));
#else
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(v));
#endif
}
#endif

inline std::int16_t mulhrs(int a, int b) {
  return static_cast<std::int16_t>((a * b + 0x4000) >> 15);
}
// Branch-free so the scalar table's loops still auto-vectorize at the baseline ISA.
inline std::int16_t add_sat(int a, int b) {
  const int sum = a + b;
  const int hi = sum < 32767 ? sum : 32767;
  return static_cast<std::int16_t>(hi > -32768 ? hi : -32768);
}

#if STOKE_ISA > 0
#if STOKE_ISA == 1
using I16 = __m128i;
constexpr std::size_t kLanes16 = 8;
inline I16 widen7(const std::uint8_t* p) {
  return _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 7);
}
inline I16 splat16(std::int16_t w) {
  return _mm_set1_epi16(w);
}
inline I16 mulhrs_v(I16 a, I16 b) {
  return _mm_mulhrs_epi16(a, b);
}
inline I16 adds_v(I16 a, I16 b) {
  return _mm_adds_epi16(a, b);
}
inline void store16(std::int16_t* p, I16 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}
#elif STOKE_ISA == 2
using I16 = __m256i;
constexpr std::size_t kLanes16 = 16;
inline I16 widen7(const std::uint8_t* p) {
  return _mm256_slli_epi16(
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 7);
}
inline I16 splat16(std::int16_t w) {
  return _mm256_set1_epi16(w);
}
inline I16 mulhrs_v(I16 a, I16 b) {
  return _mm256_mulhrs_epi16(a, b);
}
inline I16 adds_v(I16 a, I16 b) {
  return _mm256_adds_epi16(a, b);
}
inline void store16(std::int16_t* p, I16 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}
#else
using I16 = __m512i;
constexpr std::size_t kLanes16 = 32;
inline I16 widen7(const std::uint8_t* p) {
  return _mm512_slli_epi16(
      _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 7);
}
inline I16 splat16(std::int16_t w) {
  return _mm512_set1_epi16(w);
}
inline I16 mulhrs_v(I16 a, I16 b) {
  return _mm512_mulhrs_epi16(a, b);
}
inline I16 adds_v(I16 a, I16 b) {
  return _mm512_adds_epi16(a, b);
}
inline void store16(std::int16_t* p, I16 v) {
  _mm512_storeu_si512(p, v);
}
#endif
#endif

void vertical(const std::uint8_t* const* rows, const std::int16_t* weights, int taps, std::size_t n,
              std::int16_t* acc) {
  std::size_t i = 0;
  if (taps == 1) {  // identity axis: exact
#if STOKE_ISA > 0
    for (; i + kLanes16 <= n; i += kLanes16) store16(acc + i, widen7(rows[0] + i));
#endif
    for (; i < n; ++i) acc[i] = static_cast<std::int16_t>(rows[0][i] << 7);
    return;
  }
#if STOKE_ISA > 0
  if (taps == 2) {  // bilinear: weights stay in registers
    const I16 w0 = splat16(weights[0]), w1 = splat16(weights[1]);
    for (; i + kLanes16 <= n; i += kLanes16) {
      store16(acc + i,
              adds_v(mulhrs_v(widen7(rows[0] + i), w0), mulhrs_v(widen7(rows[1] + i), w1)));
    }
  }
  for (; i + kLanes16 <= n; i += kLanes16) {
    I16 sum = mulhrs_v(widen7(rows[0] + i), splat16(weights[0]));
    for (int k = 1; k < taps; ++k)
      sum = adds_v(sum, mulhrs_v(widen7(rows[k] + i), splat16(weights[k])));
    store16(acc + i, sum);
  }
#endif
  for (; i < n; ++i) {
    std::int16_t sum = mulhrs(rows[0][i] << 7, weights[0]);
    for (int k = 1; k < taps; ++k) sum = add_sat(sum, mulhrs(rows[k][i] << 7, weights[k]));
    acc[i] = sum;
  }
}

void horizontal(const std::int16_t* src, const std::int32_t* index, const float* weights,
                std::size_t weight_stride, int taps, int tap_step, std::size_t n, float* out) {
  std::size_t j = 0;
#if STOKE_ISA > 0
  for (; j + kLanes <= n; j += kLanes) {
    FloatBatch sum = FloatBatch::load_unaligned(weights + j) * gather(src, index + j);
    for (int k = 1; k < taps; ++k) {
      sum = sum + FloatBatch::load_unaligned(weights + k * weight_stride + j) *
                      gather(src + k * tap_step, index + j);
    }
    sum.store_unaligned(out + j);
  }
#endif
  for (; j < n; ++j) {
    float sum = weights[j] * src[index[j]];
    for (int k = 1; k < taps; ++k) {
      sum = sum + weights[k * weight_stride + j] * src[index[j] + k * tap_step];
    }
    out[j] = sum;
  }
}

void horizontal_affine(const std::int16_t* src, const std::int32_t* index, const float* weights,
                       std::size_t weight_stride, int taps, int tap_step, std::size_t n,
                       float scale, float bias, float* out) {
  std::size_t j = 0;
#if STOKE_ISA > 0
  const FloatBatch s(scale), b(bias);
  for (; j + kLanes <= n; j += kLanes) {
    FloatBatch sum = FloatBatch::load_unaligned(weights + j) * gather(src, index + j);
    for (int k = 1; k < taps; ++k) {
      sum = sum + FloatBatch::load_unaligned(weights + k * weight_stride + j) *
                      gather(src + k * tap_step, index + j);
    }
    (sum * s + b).store_unaligned(out + j);
  }
#endif
  for (; j < n; ++j) {
    float sum = weights[j] * src[index[j]];
    for (int k = 1; k < taps; ++k) {
      sum = sum + weights[k * weight_stride + j] * src[index[j] + k * tap_step];
    }
    out[j] = sum * scale + bias;
  }
}

void horizontal_rgb(const std::int16_t* src, const std::int32_t* start3, const float* weights,
                    std::size_t weight_stride, int taps, std::size_t n, float* out) {
  std::size_t x = 0;
#if STOKE_ISA == 1
  for (; x < n; ++x) {
    auto load = [&](int k) {
      return _mm_cvtepi32_ps(_mm_cvtepi16_epi32(load4(src + start3[x] + 3 * k)));
    };
    __m128 sum = _mm_mul_ps(_mm_set1_ps(weights[x]), load(0));
    for (int k = 1; k < taps; ++k) {
      sum = _mm_add_ps(sum, _mm_mul_ps(_mm_set1_ps(weights[k * weight_stride + x]), load(k)));
    }
    _mm_storeu_ps(out + 3 * x, sum);
  }
#elif STOKE_ISA == 2
  // Two pixels per vector, one per 128-bit half.
  for (; x + 2 <= n; x += 2) {
    auto load = [&](int k) {
      const __m128i pair =
          _mm_unpacklo_epi64(load4(src + start3[x] + 3 * k), load4(src + start3[x + 1] + 3 * k));
      return _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(pair));
    };
    auto weight = [&](int k) {
      return _mm256_set_m128(_mm_set1_ps(weights[k * weight_stride + x + 1]),
                             _mm_set1_ps(weights[k * weight_stride + x]));
    };
    __m256 sum = _mm256_mul_ps(weight(0), load(0));
    for (int k = 1; k < taps; ++k) sum = _mm256_add_ps(sum, _mm256_mul_ps(weight(k), load(k)));
    _mm_storeu_ps(out + 3 * x, _mm256_castps256_ps128(sum));
    _mm_storeu_ps(out + 3 * x + 3, _mm256_extractf128_ps(sum, 1));
  }
#elif STOKE_ISA == 3
  // Four pixels per vector, one per 128-bit lane; lane 3 of each is dropped
  // by the compress before the store.
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (; x + 4 <= n; x += 4) {
    auto load = [&](int k) {
      const __m128i lo =
          _mm_unpacklo_epi64(load4(src + start3[x] + 3 * k), load4(src + start3[x + 1] + 3 * k));
      const __m128i hi = _mm_unpacklo_epi64(load4(src + start3[x + 2] + 3 * k),
                                            load4(src + start3[x + 3] + 3 * k));
      return _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_set_m128i(hi, lo)));
    };
    auto weight = [&](int k) {
      return _mm512_permutexvar_ps(
          spread, _mm512_castps128_ps512(_mm_loadu_ps(weights + k * weight_stride + x)));
    };
    __m512 sum = _mm512_mul_ps(weight(0), load(0));
    for (int k = 1; k < taps; ++k) sum = _mm512_add_ps(sum, _mm512_mul_ps(weight(k), load(k)));
    _mm512_mask_storeu_ps(out + 3 * x, 0x0FFF, _mm512_maskz_compress_ps(0x7777, sum));
  }
#endif
  for (; x < n; ++x) {
    for (int c = 0; c < 3; ++c) {
      float sum = weights[x] * src[start3[x] + c];
      for (int k = 1; k < taps; ++k)
        sum = sum + weights[k * weight_stride + x] * src[start3[x] + 3 * k + c];
      out[3 * x + c] = sum;
    }
  }
}

// Written as a plain loop on purpose: compiled with this unit's flags, the
// compiler vectorizes the stride-3 loads with the ISA's own permutes.
void store_planes_rgb(const float* row, std::size_t n, const float* scale, const float* bias,
                      float* plane0, float* plane1, float* plane2) {
  const float s0 = scale[0], s1 = scale[1], s2 = scale[2];
  const float b0 = bias[0], b1 = bias[1], b2 = bias[2];
  for (std::size_t x = 0; x < n; ++x) {
    plane0[x] = row[3 * x] * s0 + b0;
    plane1[x] = row[3 * x + 1] * s1 + b1;
    plane2[x] = row[3 * x + 2] * s2 + b2;
  }
}

void store_u8(const float* v, std::size_t n, std::uint8_t* out) {
  std::size_t j = 0;
#if STOKE_ISA > 0
  for (; j + kLanes <= n; j += kLanes) store_u8_batch(FloatBatch::load_unaligned(v + j), out + j);
#endif
  for (; j < n; ++j) out[j] = round_u8(v[j]);
}

void store_f32(const float* v, std::size_t n, float scale, float bias, float* out) {
  std::size_t j = 0;
#if STOKE_ISA > 0
  const FloatBatch s(scale), b(bias);
  for (; j + kLanes <= n; j += kLanes)
    (FloatBatch::load_unaligned(v + j) * s + b).store_unaligned(out + j);
#endif
  for (; j < n; ++j) out[j] = v[j] * scale + bias;
}

void store_f16(const float* v, std::size_t n, float scale, float bias, std::uint16_t* out) {
  std::size_t j = 0;
#if STOKE_ISA >= 2
  const FloatBatch s(scale), b(bias);
  for (; j + kLanes <= n; j += kLanes) {
    const FloatBatch x = FloatBatch::load_unaligned(v + j) * s + b;
#if STOKE_ISA == 2
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
#else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
#endif
  }
#endif
  // SSE4.1 has no half conversion instruction (F16C comes with AVX).
  for (; j < n; ++j) out[j] = float_to_half(v[j] * scale + bias);
}

void store_bf16(const float* v, std::size_t n, float scale, float bias, std::uint16_t* out) {
  std::size_t j = 0;
#if STOKE_ISA > 0
  using U32 = xsimd::batch<std::uint32_t, Arch>;
  const FloatBatch s(scale), b(bias);
  const U32 one(1u), half_ulp(0x7FFFu);
  for (; j + kLanes <= n; j += kLanes) {
    const U32 bits = xsimd::bitwise_cast<U32>(FloatBatch::load_unaligned(v + j) * s + b);
    store_u16_from_u32((bits + half_ulp + ((bits >> 16) & one)) >> 16, out + j);
  }
#endif
  for (; j < n; ++j) out[j] = float_to_bfloat16(v[j] * scale + bias);
}

void affine_u8(std::uint8_t* p, std::size_t n, float alpha, float beta) {
  std::size_t j = 0;
#if STOKE_ISA > 0
  const FloatBatch a(alpha), b(beta);
  for (; j + kLanes <= n; j += kLanes) store_u8_batch(load_u8(p + j) * a + b, p + j);
#endif
  for (; j < n; ++j) p[j] = round_u8(static_cast<float>(p[j]) * alpha + beta);
}

void vertical_u16(const std::uint16_t* const* rows, const float* weights, int taps, std::size_t n,
                  float* out) {
  std::size_t i = 0;
#if STOKE_ISA > 0
  for (; i + kLanes <= n; i += kLanes) {
    FloatBatch sum = FloatBatch(weights[0]) * load_u16(rows[0] + i);
    for (int k = 1; k < taps; ++k) sum = sum + FloatBatch(weights[k]) * load_u16(rows[k] + i);
    sum.store_unaligned(out + i);
  }
#endif
  for (; i < n; ++i) {
    float sum = weights[0] * static_cast<float>(rows[0][i]);
    for (int k = 1; k < taps; ++k) sum = sum + weights[k] * static_cast<float>(rows[k][i]);
    out[i] = sum;
  }
}

constexpr RowKernels kTable{vertical,         horizontal, horizontal_affine, horizontal_rgb,
                            store_planes_rgb, store_u8,   store_f32,         store_f16,
                            store_bf16,       affine_u8,  vertical_u16};

}  // namespace
}  // namespace stoke::image_detail::STOKE_ISA_NS
