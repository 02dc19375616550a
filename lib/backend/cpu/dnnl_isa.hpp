// STOKE_CPU_SIMD caps oneDNN too: a context that forces a level (avx2, ...)
// sets oneDNN's maximum instruction set, so that its convolutions follow the
// same setting as stoke's own kernels. oneDNN takes this once per process,
// before its first primitive: the first context that forces a level wins, a
// later different one is warned about (the CPU backend's own kernels follow
// each context regardless).
#pragma once

#include "stoke/context.hpp"
#include "stoke/export.hpp"

namespace stoke::cpu {

// Does nothing for an automatic SIMD setting (false). True when oneDNN is
// capped at the context's level now (by this call or an earlier one).
STOKE_INTERNAL bool cap_library_isa(const Context& context);

}  // namespace stoke::cpu
