#include "stoke/context.hpp"

#include "stoke/threads.hpp"
#include "threads/arena.hpp"

namespace stoke {

struct Context::State {
  Config config;
  Settings settings;
  CpuInfo cpu;
  bool gpu_computes = false;
  SimdLevel simd = SimdLevel::kScalar;
  int cpu_threads = 1;
  std::shared_ptr<detail::ThreadArena> arena;  // null: the library arena
};

namespace {

std::shared_ptr<Context::State> resolved(Config config, Settings settings, const CpuInfo& cpu,
                                         bool gpu_computes,
                                         const std::shared_ptr<detail::ThreadArena>& reuse) {
  auto state = std::make_shared<Context::State>();
  state->config = std::move(config);
  state->settings = std::move(settings);
  state->cpu = cpu;
  state->gpu_computes = gpu_computes;
  state->simd = resolve_simd(state->settings, cpu);
  state->cpu_threads = resolve_cpu_threads(state->settings, cpu, gpu_computes);
  state->arena = reuse && detail::thread_arena_size(*reuse) == state->cpu_threads
                     ? reuse
                     : detail::make_thread_arena(state->cpu_threads);
  return state;
}

}  // namespace

Context::Context() {
  // Immutable and shared by every default context (options structs hold one).
  static const std::shared_ptr<const State> defaults = [] {
    auto state = std::make_shared<State>();
    state->cpu = query_cpu();
    state->simd = resolve_simd(state->settings, state->cpu);
    return state;
  }();
  state_ = defaults;
}

Context::Context(Config config, bool gpu_computes)
    : Context(std::move(config), query_cpu(), gpu_computes) {}

Context::Context(Config config, const CpuInfo& cpu, bool gpu_computes) {
  Settings settings = config.settings();
  state_ = resolved(std::move(config), std::move(settings), cpu, gpu_computes, nullptr);
}

Context::Context(std::shared_ptr<const State> state) : state_(std::move(state)) {}

Context Context::from_environment(bool gpu_computes) {
  return Context(Config::load(), gpu_computes);
}

Context Context::with_settings(const Settings& settings) const {
  return Context(
      resolved(state_->config, settings, state_->cpu, state_->gpu_computes, state_->arena));
}

std::shared_ptr<detail::ThreadArena> context_arena(const Context& context) noexcept {
  return context.state_->arena;
}

const Config& Context::config() const noexcept {
  return state_->config;
}
const Settings& Context::settings() const noexcept {
  return state_->settings;
}
SimdLevel Context::simd() const noexcept {
  return state_->simd;
}
int Context::cpu_threads() const noexcept {
  return state_->arena ? state_->cpu_threads : thread_count();
}

void Context::run(const std::function<void()>& fn) const {
  if (!state_->arena) return fn();  // the default context: the arena already current
  const detail::ArenaScope scope(state_->arena);
  fn();
}

}  // namespace stoke
