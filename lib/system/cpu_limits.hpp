// What Config::load checks the knobs against (physical cores, SIMD level),
// without re-reading the /sys topology on every load.
#pragma once

#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke {

struct CpuLimits {
  int physical_cores = 1;
  SimdLevel simd = SimdLevel::kScalar;
};

// Computed by query_cpu() the first time and again whenever the process's
// affinity mask has changed since; otherwise the cached answer (one
// sched_getaffinity call). Thread-safe.
STOKE_INTERNAL CpuLimits cpu_limits();

}  // namespace stoke
