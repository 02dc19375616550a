// Out of memory in a training step. With batch size auto the device batch
// halves and the batch multiplier doubles (the effective batch stays) and the
// epoch starts again; with a fixed batch size, or at batch 1, the fit stops
// (after its stop checkpoint). Either way the caller first releases the
// failed step's memory.
#pragma once

#include "stoke/error.hpp"

namespace stoke::detail {

class OutOfMemoryPolicy {
 public:
  explicit OutOfMemoryPolicy(bool auto_batch) : auto_batch_(auto_batch) {}
  // true: retry with *batch and *multiplier updated (and say so in the log);
  // false: stop.
  bool retry(const OutOfMemory& e, int* batch, int* multiplier);
  int retries() const noexcept { return retries_; }

 private:
  bool auto_batch_;
  int retries_ = 0;
};

}  // namespace stoke::detail
