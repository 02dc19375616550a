// The registry's side of the explicit context, handed down by init().
#pragma once

#include "stoke/config.hpp"
#include "stoke/context.hpp"

namespace stoke::detail {

// init()'s context: the shared GPU backends ("cuda:<i>") are made with its
// settings when they have not been made yet (once per process, on the first
// lookup; make_backend(context, name) makes others), and the shared CPU
// backend (made before it, with the default context) takes its SIMD level
// for the kernels and oneDNN's cap.
void set_registry_context(const Context& context);

}  // namespace stoke::detail
