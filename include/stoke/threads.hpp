// The library's CPU thread pool: a oneTBB arena sized by STOKE_CPU_THREADS.
// Every CPU kernel and the preprocessing pipeline run through this seam, so the
// process never grows a pool behind the application's back. A Context brings
// an arena of its own; while Context::run is active on a thread, the calls
// below use that arena instead of the library's.
#pragma once

#include <cstddef>
#include <functional>

#include "stoke/export.hpp"

namespace stoke {

enum class Execution { kParallel, kSerial };

// Sizes the library arena to `threads` (>= 1; InvalidArgument otherwise). Work
// already running finishes in the old arena. Until the first call the arena
// has one thread per physical core.
STOKE_API void set_thread_count(int threads);
// The size of the arena work on the calling thread runs in (a context's
// while Context::run is active, else the library's).
STOKE_API int thread_count() noexcept;

// Calls body(chunk_begin, chunk_end) over disjoint chunks that cover
// [begin, end), each at least `grain` long except the last. kParallel runs the
// chunks on the library arena; kSerial runs them in order on the calling thread,
// with the same chunking, so tests can compare the two.
// An exception thrown by body reaches the caller.
STOKE_API void parallel_for(std::size_t begin, std::size_t end, std::size_t grain,
                            const std::function<void(std::size_t, std::size_t)>& body,
                            Execution execution = Execution::kParallel);

// Runs fn inside the library arena (for pipelines and nested parallel work).
STOKE_API void run_in_arena(const std::function<void()>& fn);

}  // namespace stoke
