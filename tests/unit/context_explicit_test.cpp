// The explicit context: every knob set through the API (none in the
// environment) reaches the backend, the SIMD level, the loader, the
// prefetcher, the trainer and the autotuner; two contexts in one process
// keep their own values; nothing below the public entry reads STOKE_*.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/context.hpp"
#include "stoke/error.hpp"
#include "stoke/prefetch.hpp"
#include "stoke/runtime.hpp"
#include "stoke/threads.hpp"
#include "stoke/tune.hpp"
#include "unit/tiny_dataset.hpp"

extern char** environ;

namespace stoke {
namespace {

// Removes every STOKE_* variable for the test and puts them back after it.
class NoStokeEnvironment {
 public:
  NoStokeEnvironment() {
    for (char** e = environ; e && *e; ++e) {
      const std::string entry(*e);
      const auto eq = entry.find('=');
      if (entry.rfind("STOKE_", 0) == 0 && eq != std::string::npos) {
        saved_.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
      }
    }
    for (const auto& [name, value] : saved_) ::unsetenv(name.c_str());
  }
  ~NoStokeEnvironment() {
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

// Every knob of the table, set through the API.
Config every_knob(const char* simd, const char* threads, const char* depth, const char* cache) {
  Config c;
  c.set("STOKE_GPU_DEVICE", "cpu");
  c.set("STOKE_GPU_MEM_PERCENT", "40");
  c.set("STOKE_GPU_MEM_MAX", "1G");
  c.set("STOKE_GPU_STREAMS", "off");
  c.set("STOKE_GPU_GRAPH", "off");
  c.set("STOKE_GPU_JIT", "off");
  c.set("STOKE_HOST_PINNED", "off");
  c.set("STOKE_HOST_PINNED_MAX", "64M");
  c.set("STOKE_CPU_THREADS", threads);
  c.set("STOKE_CPU_SIMD", simd);
  c.set("STOKE_PREFETCH_DEPTH", depth);
  c.set("STOKE_CACHE", cache);
  c.set("STOKE_LOG_LEVEL", "warn");
  c.set("STOKE_MAX_IMAGE_PIXELS", "50000000");
  c.set("STOKE_PRECISION", "fp32");
  c.set("STOKE_CUDA_PLUGIN", "off");
  c.set("STOKE_JIT_CACHE", "/nonexistent/stoke-jit");
  for (const auto& knob : c.knobs()) EXPECT_EQ(knob.source, ConfigSource::kApi) << knob.name;
  return c;
}

// What `auto` resolves to here; a context forced to scalar gets another
// kernel table wherever the CPU has AVX2.
SimdLevel best_simd() {
  return query_cpu().simd;
}

// Fills the first batch of each loader (one buffer for all: same options).
void fill_first_batches(std::initializer_list<Loader*> loaders) {
  Loader& first = **loaders.begin();
  std::vector<std::byte> images(first.batch_size() * first.sample_bytes());
  std::vector<std::int32_t> labels(first.batch_size());
  for (Loader* loader : loaders) loader->fill_batch(0, 0, images, labels);
}

class ExplicitContext : public testing::TinyDataset {
 protected:
  NoStokeEnvironment clean_;
};

TEST_F(ExplicitContext, SimdLevelAndThreadsComeFromTheConfig) {
  const Context scalar(every_knob("scalar", "1", "3", "ram"));
  const Context wide(every_knob("auto", "2", "2", "off"));
  EXPECT_EQ(scalar.simd(), SimdLevel::kScalar);
  EXPECT_EQ(wide.simd(), best_simd());
  EXPECT_EQ(scalar.cpu_threads(), 1);
  EXPECT_EQ(wide.cpu_threads(), 2);
  EXPECT_EQ(scalar.settings().prefetch_depth, 3);
  EXPECT_EQ(scalar.settings().cuda_plugin, "off");
  EXPECT_EQ(scalar.settings().jit_cache, "/nonexistent/stoke-jit");
}

TEST_F(ExplicitContext, RunMakesTheContextsArenaCurrentOnItsWorkersToo) {
  const Context one(every_knob("auto", "1", "2", "off"));
  const Context three(every_knob("auto", "3", "2", "off"));
  const int library = thread_count();
  three.run([&] {
    EXPECT_EQ(thread_count(), 3);
    std::atomic<int> wrong{0};
    parallel_for(0, 64, 1, [&](std::size_t, std::size_t) {
      if (thread_count() != 3) ++wrong;  // nested work stays in the arena
    });
    EXPECT_EQ(wrong.load(), 0);
    one.run([&] { EXPECT_EQ(thread_count(), 1); });
    EXPECT_EQ(thread_count(), 3);
    Context().run(
        [&] { EXPECT_EQ(thread_count(), 3) << "the default context keeps the current arena"; });
  });
  EXPECT_EQ(thread_count(), library);
}

TEST_F(ExplicitContext, EachContextMakesItsOwnCpuBackend) {
  const Context scalar(every_knob("scalar", "1", "2", "off"));
  const Context wide(every_knob("auto", "2", "2", "off"));
  const auto a = make_backend(scalar);
  const auto b = make_backend(wide);
  ASSERT_TRUE(a->is_host());
  ASSERT_TRUE(b->is_host());
  const auto& cpu_a = dynamic_cast<const cpu::CpuBackend&>(*a);
  const auto& cpu_b = dynamic_cast<const cpu::CpuBackend&>(*b);
  EXPECT_EQ(std::string(cpu_a.simd_kernels().name), cpu::simd_kernels(SimdLevel::kScalar).name);
  EXPECT_EQ(std::string(cpu_b.simd_kernels().name), cpu::simd_kernels(best_simd()).name);
  // Ops split into one chunk per thread of the backend's own context,
  // whatever arena the caller runs in.
  EXPECT_EQ(cpu_a.chunks(), 1);
  EXPECT_EQ(cpu_b.chunks(), 2);
  scalar.run([&] { EXPECT_EQ(cpu_b.chunks(), 2); });
}

TEST_F(ExplicitContext, RegistryMakesEachContextItsOwnBackendFromAFactory) {
  const Context scalar(every_knob("scalar", "1", "2", "off"));
  const Context wide(every_knob("auto", "2", "2", "off"));
  const auto a = make_backend(scalar, "cpu");
  const auto b = make_backend(wide, "cpu");
  const auto& cpu_a = dynamic_cast<const cpu::CpuBackend&>(*a);
  const auto& cpu_b = dynamic_cast<const cpu::CpuBackend&>(*b);
  EXPECT_EQ(std::string(cpu_a.simd_kernels().name), cpu::simd_kernels(SimdLevel::kScalar).name);
  EXPECT_EQ(std::string(cpu_b.simd_kernels().name), cpu::simd_kernels(best_simd()).name);
  EXPECT_EQ(cpu_a.chunks(), 1);
  EXPECT_EQ(cpu_b.chunks(), 2);
  EXPECT_NE(a.get(), &cpu_backend()) << "a backend of its own, not the shared one";

  // An application's factory: the shared backend is made once, at
  // registration; each make_backend call makes another with its context.
  static std::vector<int> made_with;  // the registry keeps the factory: no captures
  register_backend_factory("test:factory", [](const Context& context) {
    made_with.push_back(context.cpu_threads());
    return make_cpu_backend(0);
  });
  ASSERT_EQ(made_with.size(), 1u);
  Backend* shared = find_backend("test:factory");
  ASSERT_NE(shared, nullptr);
  const auto own = make_backend(wide, "test:factory");
  EXPECT_NE(own.get(), shared);
  ASSERT_EQ(made_with.size(), 2u);
  EXPECT_EQ(made_with[1], 2) << "made with the context asked for";
  EXPECT_THROW(
      register_backend_factory("test:factory", [](const Context&) { return make_cpu_backend(0); }),
      InvalidArgument)
      << "the name is taken";
  EXPECT_EQ(made_with.size(), 2u);

  // A name without a factory is refused, naming the factories there are.
  try {
    (void)make_backend(wide, "no:such");
    FAIL() << "a missing factory made a backend";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no:such"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
  EXPECT_THROW(register_backend(make_cpu_backend(0)), InvalidArgument) << "\"cpu\" is taken";
}

TEST_F(ExplicitContext, LoaderTakesCacheSimdAndThreadsFromItsContext) {
  LoaderOptions cached = loader_;
  cached.cache.reset();
  cached.simd.reset();
  cached.batch_size = 16;
  cached.context = Context(every_knob("scalar", "1", "2", "ram"));
  LoaderOptions uncached = cached;
  uncached.context = Context(every_knob("auto", "2", "2", "off"));
  Loader a(data_, cached);
  Loader b(data_, uncached);
  EXPECT_EQ(a.simd(), SimdLevel::kScalar);
  EXPECT_EQ(b.simd(), best_simd());
  fill_first_batches({&a, &b});
  EXPECT_EQ(a.stats().cache_entries, 16u);
  EXPECT_EQ(b.stats().cache_entries, 0u);
}

TEST_F(ExplicitContext, PrefetcherHoldsTheContextsDepth) {
  for (const char* depth : {"2", "3"}) {
    const Context context(every_knob("auto", "1", depth, "off"));
    PrefetchOptions po = PrefetchOptions::from_settings(context.settings());
    po.sample_bytes = 4;
    po.batch_size = 1;
    po.batches_per_epoch = 8;
    Prefetcher ring(
        po, [](std::uint64_t, std::uint64_t, std::span<std::byte>, std::span<std::int32_t> labels) {
          labels[0] = 0;
          return std::size_t{1};
        });
    EXPECT_EQ(ring.stats().depth, std::stoi(depth));
    EXPECT_FALSE(ring.stats().on_device);
    std::vector<Batch> held;
    for (int i = 0; i < std::stoi(depth); ++i) held.push_back(*ring.next());
    EXPECT_THROW(ring.next(), InvalidArgument) << "every one of the " << depth << " slots is held";
  }
}

TEST_F(ExplicitContext, TwoTrainersInOneProcessEachRunInTheirOwnContext) {
  std::set<int> seen_by[2];
  std::uint64_t cache_spans[2] = {0, 0};
  const Context contexts[2] = {Context(every_knob("scalar", "1", "2", "ram")),
                               Context(every_knob("auto", "3", "4", "off"))};
  for (int i = 0; i < 2; ++i) {
    auto m = model();
    TrainerOptions o = options_;
    o.settings.reset();
    o.context = contexts[i];
    Callbacks callbacks;
    callbacks.on_step = [&, i](const StepInfo&) { seen_by[i].insert(thread_count()); };
    Trainer trainer(*m, o, callbacks);
    LoaderOptions lo = loader_;
    lo.cache.reset();
    const FitResult fit = trainer.fit(data_, nullptr, lo);
    cache_spans[i] = fit.log.epochs.back().profile.stage(Stage::kCache).count;
  }
  EXPECT_EQ(seen_by[0], std::set<int>{1});
  EXPECT_EQ(seen_by[1], std::set<int>{3});
  EXPECT_GT(cache_spans[0], 0u) << "STOKE_CACHE=ram of the first context";
  EXPECT_EQ(cache_spans[1], 0u) << "STOKE_CACHE=off of the second";
}

TEST_F(ExplicitContext, AutotunerStartsFromTheContextsSettings) {
  auto m = model();
  TrainerOptions o = options_;
  o.settings.reset();
  o.context = Context(every_knob("auto", "1", "5", "off"));
  TuneOptions tune;
  tune.steps_per_trial = 2;
  tune.max_batch = 16;
  tune.thread_candidates = {1};
  const int saved_threads = thread_count();
  const auto result = autotune(*m, data_, loader_, o, tune);
  ASSERT_FALSE(result.trials.empty());
  EXPECT_EQ(result.trials.front().settings.prefetch_depth, 5) << "the default would be 2";
  set_thread_count(saved_threads);
}

TEST_F(ExplicitContext, TheEnvironmentIsReadAtTheEntryPointOnly) {
  ::setenv("STOKE_CACHE", "ram", 1);
  ::setenv("STOKE_CPU_SIMD", "scalar", 1);
  LoaderOptions o = loader_;
  o.cache.reset();
  o.simd.reset();
  Loader below(data_, o);  // the default context: defaults, whatever the environment says
  o.context = Context::from_environment();
  Loader entry(data_, o);
  ::unsetenv("STOKE_CACHE");
  ::unsetenv("STOKE_CPU_SIMD");
  EXPECT_EQ(below.simd(), best_simd());
  EXPECT_EQ(entry.simd(), SimdLevel::kScalar);
  fill_first_batches({&below, &entry});
  EXPECT_EQ(below.stats().cache_entries, 0u);
  EXPECT_GT(entry.stats().cache_entries, 0u);
}

}  // namespace
}  // namespace stoke
