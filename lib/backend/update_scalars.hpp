// Per-step optimizer values read from a tensor when the update executes
// (SgdParams::scalars, AdamParams::scalars): checks shared by the backends.
#pragma once

#include <span>

#include "stoke/backend.hpp"
#include "stoke/export.hpp"

namespace stoke {

// Values a scalars tensor must hold: SGD {lr}, Adam {lr, bias1, bias2}.
inline constexpr std::int64_t kSgdScalars = 1;
inline constexpr std::int64_t kAdamScalars = 3;

// Backend::write_values' argument checks (defined float32 tensor, at most 4
// values, no more than it holds). The CUDA backend calls it in its host.
STOKE_PLUGIN_HOST void check_write_values(const Tensor& tensor, std::span<const float> values);

// InvalidArgument naming the op unless `scalars` is null or a float32 tensor
// of `backend` with at least `count` elements.
STOKE_INTERNAL void check_update_scalars(const char* op, const Tensor* scalars, std::int64_t count,
                                         const Backend& backend);

// For host backends: the parameters with the values read from p.scalars now
// (unchanged without scalars). Adam's bias corrections land in bias1/bias2.
STOKE_INTERNAL SgdParams resolve_on_host(const SgdParams& p);
struct ResolvedAdam {
  AdamParams params;
  float bias1 = 1.0f, bias2 = 1.0f;
};
STOKE_INTERNAL ResolvedAdam resolve_on_host(const AdamParams& p);

}  // namespace stoke
