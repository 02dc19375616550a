// Allocate/free pairs: the pool (host arena, device pool) against the system
// allocators they replace, in one binary so the ratios come from one run.
// Each pair runs with a background of live blocks, so the pool's trees and
// malloc's bins are not empty.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "memory/block_allocator.hpp"
#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace {

constexpr int kBackground = 1000;

// Sizes of the background blocks: 256 B .. 256 KiB, log-uniform, fixed seed.
std::vector<std::size_t> background_sizes() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log2size(8.0, 18.0);
  std::vector<std::size_t> sizes(kBackground);
  for (auto& s : sizes) s = static_cast<std::size_t>(std::exp2(log2size(rng)));
  return sizes;
}

// A random working set: alloc/free of random sizes with a sliding window of
// live blocks (the pattern of temporaries in a train step).
std::vector<std::size_t> mixed_sizes() {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log2size(8.0, 20.0);
  std::vector<std::size_t> sizes(4096);
  for (auto& s : sizes) s = static_cast<std::size_t>(std::exp2(log2size(rng)));
  return sizes;
}

template <typename Alloc, typename Free>
void alloc_free_pairs(benchmark::State& state, Alloc alloc, Free release) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<void*> background;
  for (std::size_t s : background_sizes()) background.push_back(alloc(s));
  for (std::size_t i = 0; i < background.size(); i += 2) release(background[i]);  // holes
  for (auto _ : state) {
    void* p = alloc(bytes);
    benchmark::DoNotOptimize(p);
    release(p);
  }
  for (std::size_t i = 1; i < background.size(); i += 2) release(background[i]);
  state.SetItemsProcessed(state.iterations());
}

template <typename Alloc, typename Free>
void mixed_window(benchmark::State& state, Alloc alloc, Free release) {
  const auto sizes = mixed_sizes();
  constexpr std::size_t kWindow = 64;
  std::vector<void*> window(kWindow, nullptr);
  std::size_t i = 0;
  for (auto _ : state) {
    void*& slot = window[i % kWindow];
    if (slot) release(slot);
    slot = alloc(sizes[i % sizes.size()]);
    benchmark::DoNotOptimize(slot);
    ++i;
  }
  for (void* p : window) {
    if (p) release(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_AllocFree_host_arena(benchmark::State& state) {
  auto arena = stoke::MemoryPool::host_arena(1ull << 30, 64u << 20);
  alloc_free_pairs(
      state, [&](std::size_t n) { return arena->allocate(n); },
      [&](void* p) { arena->deallocate(p); });
}

// The bookkeeping alone, without the pool's lock and growth policy.
void BM_AllocFree_bookkeeping(benchmark::State& state) {
  stoke::detail::BlockAllocator blocks(256);
  blocks.add_chunk(1ull << 40, 1ull << 30);
  alloc_free_pairs(
      state, [&](std::size_t n) { return reinterpret_cast<void*>(blocks.allocate(n)); },
      [&](void* p) { blocks.free(reinterpret_cast<std::uintptr_t>(p)); });
}

void BM_AllocFree_host_malloc(benchmark::State& state) {
  alloc_free_pairs(
      state, [](std::size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); });
}

void BM_AllocFreeMixed_host_arena(benchmark::State& state) {
  auto arena = stoke::MemoryPool::host_arena(1ull << 30, 64u << 20);
  mixed_window(
      state, [&](std::size_t n) { return arena->allocate(n); },
      [&](void* p) { arena->deallocate(p); });
}

void BM_AllocFreeMixed_host_malloc(benchmark::State& state) {
  mixed_window(
      state, [](std::size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); });
}

std::shared_ptr<stoke::detail::CudaDevice> device_or_skip(benchmark::State& state) {
  std::string why;
  auto device = stoke::detail::try_open_cuda_device(0, &why);
  if (!device) state.SkipWithError(("no CUDA device: " + why).c_str());
  return device;
}

void BM_AllocFree_cuda_pool(benchmark::State& state) {
  if (!device_or_skip(state)) return;
  stoke::Settings settings;
  settings.gpu_mem_max = 4ull << 30;
  auto pool = stoke::MemoryPool::device(settings, 0);
  alloc_free_pairs(
      state, [&](std::size_t n) { return pool->allocate(n); },
      [&](void* p) { pool->deallocate(p); });
}

void BM_AllocFree_cuda_cudaMalloc(benchmark::State& state) {
  auto device = device_or_skip(state);
  if (!device) return;
  alloc_free_pairs(
      state, [&](std::size_t n) { return device->device_alloc(n); },
      [&](void* p) { device->device_free(p); });
}

// Host->device copy bandwidth of staging memory, pinned (arg 1) or pageable (0).
void BM_Upload_cuda_staging(benchmark::State& state) {
  auto device = device_or_skip(state);
  if (!device) return;
  const bool pinned = state.range(0) != 0;
  const auto bytes = static_cast<std::size_t>(state.range(1));
  stoke::Settings settings;
  settings.host_pinned = pinned;
  stoke::HostStaging staging(settings, device);
  stoke::StagingBuffer src = staging.allocate(bytes);
  void* dst = device->device_alloc(bytes);
  auto stream = device->create_stream();
  auto start = device->create_event(true);
  auto end = device->create_event(true);
  for (auto _ : state) {
    device->record(start, stream);
    device->copy_to_device(dst, src.data(), bytes, stream);
    device->record(end, stream);
    device->wait(end);
    state.SetIterationTime(device->elapsed_ms(start, end) / 1000.0);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.SetLabel(src.pinned() ? "pinned" : "pageable");
  device->destroy_event(start);
  device->destroy_event(end);
  device->destroy_stream(stream);
  device->device_free(dst);
}

}  // namespace

BENCHMARK(BM_AllocFree_host_arena)
    ->Name("BM_AllocFree/host_arena/u8")
    ->RangeMultiplier(16)
    ->Range(256, 1 << 20);
BENCHMARK(BM_AllocFree_bookkeeping)
    ->Name("BM_AllocFree/bookkeeping_only/u8")
    ->RangeMultiplier(16)
    ->Range(256, 1 << 20);
BENCHMARK(BM_AllocFree_host_malloc)
    ->Name("BM_AllocFree/host_malloc/u8")
    ->RangeMultiplier(16)
    ->Range(256, 1 << 20);
BENCHMARK(BM_AllocFreeMixed_host_arena)->Name("BM_AllocFreeMixed/host_arena/u8/window64");
BENCHMARK(BM_AllocFreeMixed_host_malloc)->Name("BM_AllocFreeMixed/host_malloc/u8/window64");
BENCHMARK(BM_AllocFree_cuda_pool)
    ->Name("BM_AllocFree/cuda_pool/u8")
    ->RangeMultiplier(16)
    ->Range(256, 1 << 20);
BENCHMARK(BM_AllocFree_cuda_cudaMalloc)
    ->Name("BM_AllocFree/cuda_cudaMalloc/u8")
    ->RangeMultiplier(16)
    ->Range(256, 1 << 20);
BENCHMARK(BM_Upload_cuda_staging)
    ->Name("BM_Upload/cuda/u8")
    ->ArgsProduct({{0, 1}, {64 << 20}})
    ->UseManualTime();
