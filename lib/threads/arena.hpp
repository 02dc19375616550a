// Thread arenas beside the library's one: a Context owns an arena sized by
// its settings and makes it current on the threads that work for it, so two
// differently configured trainers in one process each run on their own.
#pragma once

#include <memory>

namespace stoke {
class Context;
}

namespace stoke::detail {

struct ThreadArena;  // a oneTBB arena of a fixed size (threads.cpp)

// Makes `arena` the library's (init(): its context's arena, so the process has
// one, not a second of the same size); null is ignored.
void set_library_arena(std::shared_ptr<ThreadArena> arena);

// InvalidArgument for threads < 1.
std::shared_ptr<ThreadArena> make_thread_arena(int threads);
int thread_arena_size(const ThreadArena& arena) noexcept;

// Makes `arena` the one parallel_for, run_in_arena and thread_count() use on
// the calling thread (and on the arena's workers while they run its chunks)
// until destroyed; null = the library arena. Scopes nest.
class ArenaScope {
 public:
  explicit ArenaScope(std::shared_ptr<ThreadArena> arena);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  std::shared_ptr<ThreadArena> arena_;
  ThreadArena* previous_;
};

}  // namespace stoke::detail

namespace stoke {
// The context's arena, null for a default context (lib/context/context.cpp).
std::shared_ptr<detail::ThreadArena> context_arena(const Context& context) noexcept;
}  // namespace stoke
