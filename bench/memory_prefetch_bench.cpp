// Prefetch overlap on the CPU backend with real work on both sides: the
// producer runs a compute loop that writes the batch (cost P per batch), the
// consumer one that reads it (cost C). Serialized, n batches take n * (P + C);
// with the ring they should take about n * max(P, C) + one batch.
//
// Counters: P_ms and C_ms (per batch, timed inside the run), wall_ms,
// bound_ms = n * max(P, C), serial_ms = n * (P + C), efficiency =
// bound / wall (1 = perfect overlap) and target = wall / (1.1 * bound +
// max(P, C)) (<= 1 meets the target).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "stoke/prefetch.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kFloats = 32 * 1024;  // 128 KiB per batch: stays in L2
constexpr int kBatches = 40;

// Producer: writes each element after `rounds` dependent multiply-adds.
void produce(std::span<std::byte> bytes, std::uint64_t seed, int rounds) {
  auto* out = reinterpret_cast<float*>(bytes.data());
  for (std::size_t i = 0; i < kFloats; ++i) {
    float x = static_cast<float>((i * 2654435761u + seed) & 0xffff) * (1.0f / 65536.0f);
    for (int r = 0; r < rounds; ++r) x = x * 0.999f + 0.001f;
    out[i] = x;
  }
}

// Consumer: reads each element through `rounds` dependent multiply-adds.
float consume(std::span<const std::byte> bytes, int rounds) {
  const auto* in = reinterpret_cast<const float*>(bytes.data());
  float sum = 0.0f;
  for (std::size_t i = 0; i < kFloats; ++i) {
    float x = in[i];
    for (int r = 0; r < rounds; ++r) x = x * 1.001f - 0.001f;
    sum += x;
  }
  return sum;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void BM_Prefetch(benchmark::State& state, bool ring) {
  const int producer_rounds = static_cast<int>(state.range(0));
  const int consumer_rounds = static_cast<int>(state.range(1));
  const int depth = static_cast<int>(state.range(2));
  std::vector<std::byte> scratch(kFloats * sizeof(float));

  // P and C are timed around every fill and consume call of the run itself,
  // so that the bound is computed from the costs the run actually paid (on a
  // shared machine they drift between runs).
  float sink = 0.0f;
  double fill_ms = 0.0, consume_ms = 0.0;
  auto timed_consume = [&](std::span<const std::byte> bytes) {
    const auto t0 = Clock::now();
    sink += consume(bytes, consumer_rounds);
    consume_ms += ms_since(t0);
  };
  stoke::PrefetchOptions options;
  options.sample_bytes = kFloats * sizeof(float);
  options.batch_size = 1;
  options.batches_per_epoch = kBatches;
  options.depth = depth;
  auto fill = [&](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                  std::span<std::int32_t> labels) {
    produce(images, b, producer_rounds);
    labels[0] = static_cast<std::int32_t>(b);
    return std::size_t{1};
  };

  double wall_ms = 0.0, wait_ms = 0.0;
  for (auto _ : state) {
    const auto t = Clock::now();
    if (ring) {
      stoke::Prefetcher prefetcher(options, fill);
      while (auto batch = prefetcher.next()) timed_consume(batch->images());
      const stoke::PrefetchStats stats = prefetcher.stats();
      wait_ms += stats.wait_seconds * 1000.0;
      fill_ms += stats.fill_seconds * 1000.0;
    } else {
      for (int b = 0; b < kBatches; ++b) {
        const auto t0 = Clock::now();
        produce(scratch, b, producer_rounds);
        fill_ms += ms_since(t0);
        timed_consume(scratch);
      }
    }
    wall_ms += ms_since(t);
  }
  benchmark::DoNotOptimize(sink);
  const double n = static_cast<double>(state.iterations());
  wall_ms /= n;
  const double p_ms = fill_ms / (n * kBatches);
  const double c_ms = consume_ms / (n * kBatches);
  const double bound = kBatches * std::max(p_ms, c_ms);
  state.counters["P_ms"] = p_ms;
  state.counters["C_ms"] = c_ms;
  state.counters["wall_ms"] = wall_ms;
  state.counters["bound_ms"] = bound;
  state.counters["serial_ms"] = kBatches * (p_ms + c_ms);
  state.counters["efficiency"] = bound / wall_ms;
  state.counters["target"] = wall_ms / (1.1 * bound + std::max(p_ms, c_ms));
  if (ring) state.counters["starved_ms"] = wait_ms / n;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kBatches);
}

void BM_Prefetch_serial(benchmark::State& state) {
  BM_Prefetch(state, false);
}
void BM_Prefetch_ring(benchmark::State& state) {
  BM_Prefetch(state, true);
}

// Args: producer rounds, consumer rounds, depth. Rounds of 64 cost about 2 ms
// per batch on a 2020s x86 core.
void shapes(benchmark::internal::Benchmark* b) {
  b->Args({64, 64, 2})->Args({128, 64, 2})->Args({64, 128, 2})->Args({64, 64, 4});
  b->ArgNames({"P", "C", "depth"})->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
}

// On a CUDA device: 12 batches of 32 MiB whose consumer work is a
// device->host copy of the same size (another copy engine). On one stream
// the device time is about the sum of uploads and reads; with a copy stream
// about the larger of the two. Manual time: the device time of the 12
// batches from CUDA events (the overlap GPU test asserts the order of
// uploads and reads; how much they overlap is this bench's figure).
void BM_PrefetchOverlap_cuda(benchmark::State& state, bool copy_stream) {
  std::string why;
  auto device = stoke::detail::try_open_cuda_device(0, &why);
  if (!device) {
    state.SkipWithError(("no CUDA device: " + why).c_str());
    return;
  }
  constexpr std::size_t kBytes = 32u << 20;
  constexpr int kOverlapBatches = 12;
  stoke::PrefetchOptions o;
  o.sample_bytes = kBytes;
  o.batch_size = 1;
  o.batches_per_epoch = kOverlapBatches;
  o.depth = 3;
  o.device = 0;
  o.gpu_streams = copy_stream;
  auto compute = device->create_stream();
  o.compute_stream = compute;
  // The producer is nearly free: the images are whatever the slot holds.
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    images[0] = static_cast<std::byte>(b);
    labels[0] = static_cast<std::int32_t>(b);
    return std::size_t{1};
  };
  void* sink = device->pinned_alloc(kBytes);
  auto start = device->create_event(true);
  auto end = device->create_event(true);
  for (auto _ : state) {
    stoke::Prefetcher prefetcher(o, fill, device);
    auto first = prefetcher.next();
    device->record(start, compute);
    device->copy_to_host(sink, first->device_images(), kBytes, compute);
    first->release();
    while (auto batch = prefetcher.next()) {
      device->copy_to_host(sink, batch->device_images(), kBytes, compute);
      batch->release();
    }
    device->record(end, compute);
    device->wait(end);
    state.SetIterationTime(device->elapsed_ms(start, end) / 1000.0);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * kOverlapBatches * 2 *
                          static_cast<std::int64_t>(kBytes));
  device->destroy_event(start);
  device->destroy_event(end);
  device->pinned_free(sink);
  device->destroy_stream(compute);
}

void BM_PrefetchOverlap_cuda_one_stream(benchmark::State& state) {
  BM_PrefetchOverlap_cuda(state, false);
}
void BM_PrefetchOverlap_cuda_copy_stream(benchmark::State& state) {
  BM_PrefetchOverlap_cuda(state, true);
}

}  // namespace

BENCHMARK(BM_PrefetchOverlap_cuda_one_stream)
    ->Name("BM_PrefetchOverlap/cuda_one_stream/u8/32MiB")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_PrefetchOverlap_cuda_copy_stream)
    ->Name("BM_PrefetchOverlap/cuda_copy_stream/u8/32MiB")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_Prefetch_serial)->Name("BM_Prefetch/cpu_serial/f32/128KiB")->Apply(shapes);
BENCHMARK(BM_Prefetch_ring)->Name("BM_Prefetch/cpu_ring/f32/128KiB")->Apply(shapes);
