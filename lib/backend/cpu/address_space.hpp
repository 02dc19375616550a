// Out of address space is an OutOfMemory, not a hang or a crash inside a
// library. OpenBLAS retries a failed mapping of its work buffer forever, and
// oneDNN's JIT code generation crashes when its mapping fails; neither tells
// its caller. Under an address-space limit (ulimit -v / RLIMIT_AS, or
// RLIMIT_DATA) the CPU backend therefore proves, before calling into them,
// that the space they may map is still free.
#pragma once

#include <cstddef>
#include <string_view>

namespace stoke::cpu {

// Whether such a limit is set (read once, at the first call).
bool address_space_limited() noexcept;

// Without a limit: nothing (the kernel's own OOM handling applies). With one:
// reserves and releases `bytes` of address space (never touched, no memory
// used) and throws OutOfMemory naming `what` and the limit when that fails.
void require_address_space(std::size_t bytes, std::string_view what);

}  // namespace stoke::cpu
