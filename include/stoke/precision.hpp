// The compute precision of inference (STOKE_PRECISION, docs/precision.md).
#pragma once

#include <cstdint>

#include "stoke/export.hpp"

namespace stoke {

// fp32: everything in fp32. bf16: convolutions compute on bf16 activations
// and weights with fp32 accumulation (oneDNN's bf16 kernels on the CPU);
// batch norm is folded into the fp32 weights before they are rounded, global
// pooling and linear layers stay fp32. fp16: GPUs only (not built yet).
// auto: bf16 where the backend computes it natively, else fp32.
enum class Precision : std::uint8_t { kFp32, kBf16, kFp16, kAuto };
STOKE_API const char* to_string(Precision precision) noexcept;

// How a backend's inference programs run a precision.
enum class PrecisionSupport : std::uint8_t {
  kNone,      // not at all: asking for it is an Unsupported error
  kEmulated,  // correct but slower than fp32 (bf16 on AVX-512 without AVX512-BF16)
  kNative,    // in the device's own instructions
};

}  // namespace stoke
