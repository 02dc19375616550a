// Makes the ordering oneTBB already guarantees (work submitted before a task
// runs; tasks finished before the algorithm returns; a pipeline token's
// stages in order) visible to ThreadSanitizer, which cannot see the
// synchronization inside Debian's uninstrumented libtbb. publish() is a
// release, observe() an acquire, on one atomic: every observe() sees every
// earlier publish(). Costs one atomic operation each.
//
// Use the one process-wide instance, arena_order(): a task body must observe
// before it reads anything the caller handed it, and the closure through
// which TBB hands it over is itself such data, so the body can only reach
// the atomic through a global.
#pragma once

#include <atomic>
#include <cstdint>

namespace stoke::detail {

class TaskOrder {
 public:
  void publish() noexcept { counter_.fetch_add(1, std::memory_order_release); }
  void observe() const noexcept { (void)counter_.load(std::memory_order_acquire); }

  // Observes on destruction (exceptions too): for the caller after the work.
  class ObserveOnExit {
   public:
    explicit ObserveOnExit(const TaskOrder& order) : order_(order) {}
    ~ObserveOnExit() { order_.observe(); }
    ObserveOnExit(const ObserveOnExit&) = delete;
    ObserveOnExit& operator=(const ObserveOnExit&) = delete;

   private:
    const TaskOrder& order_;
  };

  // Observes on construction and publishes on destruction (exceptions too):
  // for each task body.
  class Scope {
   public:
    explicit Scope(TaskOrder& order) : order_(order) { order_.observe(); }
    ~Scope() { order_.publish(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TaskOrder& order_;
  };

 private:
  std::atomic<std::uint64_t> counter_{0};
};

// The instance every arena task uses (lib/threads/threads.cpp).
TaskOrder& arena_order() noexcept;

}  // namespace stoke::detail
