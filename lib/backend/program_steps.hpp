// What every inference program shares (lib/backend/program.cpp, the CPU
// backend's blocked program): the non-convolution steps through the front
// doors, and buffers sized on demand.
#pragma once

#include "stoke/program.hpp"

namespace stoke::detail {

// t holds a tensor of `shape` on `backend` afterwards (reallocated only when
// the shape differs).
STOKE_INTERNAL void ensure_shape(Backend& backend, Tensor& t, const Shape& shape);

// A step that is not a convolution (kMaxPool ... kLayer) on plain x; `out`
// is the step's own buffer. Returns the output (out, a view of x, or a
// kLayer's own tensor).
STOKE_INTERNAL const Tensor& run_plain_step(Backend& backend, const InferenceStep& step,
                                            const Tensor& x, Tensor& out);

}  // namespace stoke::detail
