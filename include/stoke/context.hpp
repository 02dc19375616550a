// The explicit context: every setting the modules below the public API use,
// built once from the application's Config (or the environment, read here and
// nowhere else) and passed down by value. Loaders, trainers, the autotuner
// and the backends a context makes take their settings, SIMD level and CPU
// thread arena from it, so two differently configured trainers can share a
// process. Copies are cheap and share one arena.
#pragma once

#include <functional>
#include <memory>

#include "stoke/config.hpp"
#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke {

namespace detail {
struct ThreadArena;  // lib/threads
}

class STOKE_API Context {
 public:
  // Defaults only (nothing read from the environment): Settings{}, the best
  // SIMD level of this CPU, and no arena of its own (work runs in the arena
  // current on the calling thread: the library's, see set_thread_count).
  Context();

  // From the application's Config. The SIMD level and the thread count are
  // resolved against `cpu` (resolve_simd, resolve_cpu_threads with
  // `gpu_computes`); the context owns an arena of that many threads.
  explicit Context(Config config, bool gpu_computes = false);
  Context(Config config, const CpuInfo& cpu, bool gpu_computes);

  // The public entry for "configure from the environment": Context(Config::load()).
  static Context from_environment(bool gpu_computes = false);

  // The same context with `settings` in effect (re-resolved SIMD level and
  // threads; a new arena when the thread count changes): the autotuner's trials.
  Context with_settings(const Settings& settings) const;

  const Config& config() const noexcept;      // provenance and load warnings
  const Settings& settings() const noexcept;  // the values every module uses
  SimdLevel simd() const noexcept;            // what CPU kernels of this context use
  int cpu_threads() const noexcept;           // its arena's size (default: the current arena's)

  // Runs fn on the calling thread with this context's arena as the one that
  // parallel_for, run_in_arena and thread_count() use (nested scopes restore
  // the outer one). The default context runs fn in the arena already current.
  void run(const std::function<void()>& fn) const;

  struct State;  // opaque (lib/context/context.cpp)
  // Its arena (null for a default context): init() makes it the library's.
  friend std::shared_ptr<detail::ThreadArena> context_arena(const Context& context) noexcept;

 private:
  explicit Context(std::shared_ptr<const State> state);
  std::shared_ptr<const State> state_;
};

}  // namespace stoke
