// The registry's side of the explicit context: the settings its shared GPU
// backends ("cuda:<i>") are created with, handed down by init().
#pragma once

#include "stoke/config.hpp"
#include "stoke/context.hpp"

namespace stoke::detail {

// Takes effect when the GPU backends have not been created yet (they are
// created once per process, on the first lookup); ignored afterwards.
void set_registry_settings(const Settings& settings);
// init()'s context for the registry's CPU backend (made before it, with the
// default context): its SIMD level for the kernels and oneDNN's cap.
void set_registry_context(const Context& context);

}  // namespace stoke::detail
