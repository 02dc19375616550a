#include "train/oom_policy.hpp"

#include <string>

#include "stoke/log.hpp"

namespace stoke::detail {

bool OutOfMemoryPolicy::retry(const OutOfMemory& e, int* batch, int* multiplier) {
  if (!auto_batch_ || *batch <= 1) return false;
  *batch /= 2;
  *multiplier *= 2;
  ++retries_;
  log_warn("out of memory at batch size " + std::to_string(*batch * 2) +
           "; continuing with batch " + std::to_string(*batch) + " x " +
           std::to_string(*multiplier) + " accumulated (same effective batch): " + e.what());
  return true;
}

}  // namespace stoke::detail
