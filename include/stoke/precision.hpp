// The compute precision of inference (STOKE_PRECISION, docs/precision.md).
#pragma once

#include <cstdint>

#include "stoke/export.hpp"

namespace stoke {

// fp32: everything in fp32. bf16: convolutions compute on bf16 activations
// and weights with fp32 accumulation (oneDNN's bf16 kernels on the CPU);
// batch norm is folded into the fp32 weights before they are rounded, global
// pooling and linear layers stay fp32. fp16: GPUs only (not built yet).
// auto: bf16 where the backend computes it natively, else fp32 (never int8).
// int8: post-training static quantization, CPU only: each convolution
// quantizes its input with a calibrated per-tensor scale and its weights
// with per-output-channel scales, accumulates in int32 and writes fp32
// (oneDNN's int8 kernels); needs a model file calibrated by stoke quantize.
enum class Precision : std::uint8_t { kFp32, kBf16, kFp16, kAuto, kInt8 };
STOKE_API const char* to_string(Precision precision) noexcept;

// How a backend's inference programs run a precision.
enum class PrecisionSupport : std::uint8_t {
  kNone,      // not at all: asking for it is an Unsupported error
  kEmulated,  // correct but slow (bf16 on AVX-512 without AVX512-BF16, int8 without VNNI)
  kNative,    // in the device's own instructions
};

}  // namespace stoke
