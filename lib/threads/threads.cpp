#include "stoke/threads.hpp"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/task_order.hpp"
#include "stoke/error.hpp"
#include "stoke/system.hpp"
#include "threads/arena.hpp"

namespace stoke {
namespace detail {

// A oneTBB arena of a fixed size. Callers hold a shared_ptr while they run,
// so a resize never destroys an arena under running work.
struct ThreadArena {
  explicit ThreadArena(int n) : threads(n), arena(n) {
    // Raises oneTBB's process-wide worker limit when more threads than
    // logical CPUs are requested (allowed, and warned about by Config), so
    // the arena really has the threads it reports.
    if (n > tbb::info::default_concurrency()) {
      allow_oversubscription = std::make_unique<tbb::global_control>(
          tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(n));
    }
  }
  int threads;
  tbb::task_arena arena;
  std::unique_ptr<tbb::global_control> allow_oversubscription;
};

}  // namespace detail

namespace {

// The library arena is one of the two pieces of process state the design
// allows (the other is the backend registry); a Context brings its own.
struct ArenaSlot {
  std::mutex mutex;
  std::shared_ptr<detail::ThreadArena> arena;
};

ArenaSlot& slot() {
  static ArenaSlot s;
  return s;
}

// The arena a Context made current on this thread (ArenaScope), also set on
// the arena's workers while they run a chunk, so nested work stays in it.
thread_local detail::ThreadArena* t_active = nullptr;

struct ActiveScope {
  explicit ActiveScope(detail::ThreadArena* arena) : previous(t_active) { t_active = arena; }
  ~ActiveScope() { t_active = previous; }
  ActiveScope(const ActiveScope&) = delete;
  ActiveScope& operator=(const ActiveScope&) = delete;
  detail::ThreadArena* previous;
};

std::shared_ptr<detail::ThreadArena> library_arena() {
  auto& s = slot();
  std::lock_guard lock(s.mutex);
  if (!s.arena)
    s.arena = std::make_shared<detail::ThreadArena>(std::max(1, query_cpu().physical_cores));
  return s.arena;
}

// The arena work on this thread runs in: the current scope's, else the
// library's (kept alive by `keep` while the caller runs).
detail::ThreadArena* current_arena(std::shared_ptr<detail::ThreadArena>& keep) {
  if (t_active) return t_active;
  keep = library_arena();
  return keep.get();
}

}  // namespace

namespace detail {
TaskOrder& arena_order() noexcept {
  static TaskOrder order;
  return order;
}
}  // namespace detail

void set_thread_count(int threads) {
  if (threads < 1) {
    throw InvalidArgument("stoke::set_thread_count: thread count must be at least 1, got " +
                          std::to_string(threads));
  }
  auto& s = slot();
  std::lock_guard lock(s.mutex);
  if (s.arena && s.arena->threads == threads) return;
  s.arena.reset();  // its oversubscription limit goes before the new one is set
  s.arena = std::make_shared<detail::ThreadArena>(threads);
}

int thread_count() noexcept {
  try {
    std::shared_ptr<detail::ThreadArena> keep;
    return current_arena(keep)->threads;
  } catch (...) {
    return 1;
  }
}

void parallel_for(std::size_t begin, std::size_t end, std::size_t grain,
                  const std::function<void(std::size_t, std::size_t)>& body, Execution execution) {
  if (end <= begin) return;
  if (grain == 0) grain = 1;
  if (execution == Execution::kSerial) {
    for (std::size_t b = begin; b < end; b += grain) body(b, std::min(end, b + grain));
    return;
  }
  // Parallelize over chunk indices so both modes see the same chunk boundaries.
  const std::size_t chunks = (end - begin + grain - 1) / grain;
  // The caller's writes happen before every body, every body (exceptions
  // included) before the return: visible to TSan (core/task_order.hpp).
  // The closures are built before the publish so that TSan sees them
  // written before a worker reads them.
  std::shared_ptr<detail::ThreadArena> keep;
  detail::ThreadArena* arena = current_arena(keep);
  auto chunk_body = [&](const tbb::blocked_range<std::size_t>& r) {
    detail::TaskOrder::Scope scope(detail::arena_order());
    const ActiveScope active(arena);
    for (std::size_t c = r.begin(); c < r.end(); ++c) {
      const std::size_t b = begin + c * grain;
      body(b, std::min(end, b + grain));
    }
  };
  auto task = [&] {
    detail::TaskOrder::Scope scope(detail::arena_order());
    const ActiveScope active(arena);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, chunks, 1), chunk_body,
                      tbb::simple_partitioner());
  };
  detail::TaskOrder& order = detail::arena_order();
  order.publish();
  detail::TaskOrder::ObserveOnExit on_exit(order);
  arena->arena.execute(task);
}

void run_in_arena(const std::function<void()>& fn) {
  // oneTBB may run fn on an arena worker rather than the caller; the closure
  // is built before the publish (see parallel_for).
  std::shared_ptr<detail::ThreadArena> keep;
  detail::ThreadArena* arena = current_arena(keep);
  auto task = [&] {
    detail::TaskOrder::Scope scope(detail::arena_order());
    const ActiveScope active(arena);
    fn();
  };
  detail::TaskOrder& order = detail::arena_order();
  order.publish();
  detail::TaskOrder::ObserveOnExit on_exit(order);
  arena->arena.execute(task);
}

namespace detail {

void set_library_arena(std::shared_ptr<ThreadArena> arena) {
  if (!arena) return;
  auto& s = slot();
  std::lock_guard lock(s.mutex);
  s.arena = std::move(arena);
}

std::shared_ptr<ThreadArena> make_thread_arena(int threads) {
  if (threads < 1) {
    throw InvalidArgument("stoke::Context: thread count must be at least 1, got " +
                          std::to_string(threads));
  }
  return std::make_shared<ThreadArena>(threads);
}

int thread_arena_size(const ThreadArena& arena) noexcept {
  return arena.threads;
}

ArenaScope::ArenaScope(std::shared_ptr<ThreadArena> arena)
    : arena_(std::move(arena)), previous_(t_active) {
  t_active = arena_.get();
}

ArenaScope::~ArenaScope() {
  t_active = previous_;
}

}  // namespace detail

}  // namespace stoke
