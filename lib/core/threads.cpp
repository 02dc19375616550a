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

namespace stoke {
namespace {

// The arena is one of the two pieces of process state the design allows (the
// other is the backend registry). Callers hold a shared_ptr while they run, so
// a resize never destroys an arena under running work.
struct ArenaSlot {
  std::mutex mutex;
  std::shared_ptr<tbb::task_arena> arena;
  // Raises oneTBB's process-wide worker limit when more threads than logical
  // CPUs are requested (allowed, and warned about by Config), so the arena
  // really has the threads it reports.
  std::unique_ptr<tbb::global_control> allow_oversubscription;
  int threads = 0;
};

ArenaSlot& slot() {
  static ArenaSlot s;
  return s;
}

std::shared_ptr<tbb::task_arena> current_arena(int* threads_out = nullptr) {
  auto& s = slot();
  std::lock_guard lock(s.mutex);
  if (!s.arena) {
    s.threads = std::max(1, query_cpu().physical_cores);
    s.arena = std::make_shared<tbb::task_arena>(s.threads);
  }
  if (threads_out) *threads_out = s.threads;
  return s.arena;
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
  if (s.arena && s.threads == threads) return;
  s.threads = threads;
  s.allow_oversubscription.reset();
  if (threads > tbb::info::default_concurrency()) {
    s.allow_oversubscription = std::make_unique<tbb::global_control>(
        tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  }
  s.arena = std::make_shared<tbb::task_arena>(threads);
}

int thread_count() noexcept {
  int threads = 0;
  try {
    current_arena(&threads);
  } catch (...) {
    return 1;
  }
  return threads;
}

void parallel_for(std::size_t begin, std::size_t end, std::size_t grain,
                  const std::function<void(std::size_t, std::size_t)>& body,
                  Execution execution) {
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
  auto chunk_body = [&](const tbb::blocked_range<std::size_t>& r) {
    detail::TaskOrder::Scope scope(detail::arena_order());
    for (std::size_t c = r.begin(); c < r.end(); ++c) {
      const std::size_t b = begin + c * grain;
      body(b, std::min(end, b + grain));
    }
  };
  auto task = [&] {
    detail::TaskOrder::Scope scope(detail::arena_order());
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, chunks, 1), chunk_body,
                      tbb::simple_partitioner());
  };
  auto arena = current_arena();
  detail::TaskOrder& order = detail::arena_order();
  order.publish();
  detail::TaskOrder::ObserveOnExit on_exit(order);
  arena->execute(task);
}

void run_in_arena(const std::function<void()>& fn) {
  // oneTBB may run fn on an arena worker rather than the caller; the closure
  // is built before the publish (see parallel_for).
  auto task = [&] {
    detail::TaskOrder::Scope scope(detail::arena_order());
    fn();
  };
  auto arena = current_arena();
  detail::TaskOrder& order = detail::arena_order();
  order.publish();
  detail::TaskOrder::ObserveOnExit on_exit(order);
  arena->execute(task);
}

}  // namespace stoke
