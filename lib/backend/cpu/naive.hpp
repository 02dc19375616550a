// Naive loop references for every op: obviously right, slow, single
// threaded, accumulating in double. The op suite (tests/unit/op_suite_*)
// compares every backend against these. Same contracts as the Backend
// methods of the same name; like the backends' implementations they take
// arguments the front door has validated (host tensors) and check nothing.
#pragma once

#include <cstdint>

#include "stoke/backend.hpp"
#include "stoke/export.hpp"

namespace stoke::cpu {

// Counter-based uniform in [0, 1) of (seed, index): splitmix64, top 24 bits.
STOKE_INTERNAL float dropout_uniform(std::uint64_t seed, std::uint64_t index) noexcept;

namespace naive {

// One reference per op of STOKE_OPS, with the op's parameters:
// naive::conv2d_forward(x, w, bias, y, params), ...
#define STOKE_NAIVE_OP(kind, name, params, args) STOKE_INTERNAL void name params;
STOKE_OPS(STOKE_NAIVE_OP)
#undef STOKE_NAIVE_OP

}  // namespace naive
}  // namespace stoke::cpu
