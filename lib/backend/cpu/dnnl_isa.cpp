// oneDNN's instruction set from the context's STOKE_CPU_SIMD (dnnl_isa.hpp).
#include "backend/cpu/dnnl_isa.hpp"

#include <mutex>
#include <string>

#include "stoke/log.hpp"

#if STOKE_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace stoke::cpu {

namespace {

std::mutex isa_mutex;
bool isa_capped = false;
SimdLevel isa_level = SimdLevel::kAvx512;

}  // namespace

bool cap_library_isa(const Context& context) {
  const SimdRequest& request = context.settings().cpu_simd;
  if (request.automatic) return false;
  const SimdLevel level = context.simd();
  std::lock_guard lock(isa_mutex);
  if (isa_capped) {
    if (level != isa_level) {
      log_warn(
          std::string("STOKE_CPU_SIMD=") + to_string(level) + ": oneDNN stays capped at " +
          to_string(isa_level) +
          " (its instruction set is fixed once per process, by the first context that set it)");
    }
    return level == isa_level;
  }
#if STOKE_HAVE_DNNL
  // oneDNN's lowest x86 level is SSE4.1: scalar and sse4 both cap there.
  const dnnl::cpu_isa isa = level == SimdLevel::kAvx512 ? dnnl::cpu_isa::avx512_core
                            : level == SimdLevel::kAvx2 ? dnnl::cpu_isa::avx2
                                                        : dnnl::cpu_isa::sse41;
  try {
    dnnl::set_max_cpu_isa(isa);
  } catch (const dnnl::error&) {
    log_warn(std::string("STOKE_CPU_SIMD=") + to_string(level) +
             ": oneDNN had already chosen its instruction set in this process and is not capped "
             "(set STOKE_CPU_SIMD before the first convolution runs, or ONEDNN_MAX_CPU_ISA)");
    return false;
  }
#endif
  isa_capped = true;
  isa_level = level;
  return true;
}

}  // namespace stoke::cpu
