// Scalar IEEE binary16 ("half") and bfloat16 conversions, rounding to
// nearest even: the image kernels' scalar path, the safetensors import
// (F16 / BF16 tensors) and the fp16 ONNX export share them.
#pragma once

#include <cstdint>

#include "stoke/export.hpp"

namespace stoke::detail {

STOKE_INTERNAL std::uint16_t float_to_half(float value) noexcept;
STOKE_INTERNAL std::uint16_t float_to_bfloat16(float value) noexcept;
STOKE_INTERNAL float half_to_float(std::uint16_t bits) noexcept;
STOKE_INTERNAL float bfloat16_to_float(std::uint16_t bits) noexcept;

}  // namespace stoke::detail
