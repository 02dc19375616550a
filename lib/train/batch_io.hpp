// How the trainer moves batches: the prefetch ring for one epoch of a loader
// (device slots on a GPU backend, host slots on the CPU), the copy of a batch
// into the step's input tensors, device-busy timing of a step and the memory
// figures of an epoch's profile.
#pragma once

#include <cstdint>
#include <optional>

#include "stoke/backend.hpp"
#include "stoke/cuda.hpp"
#include "stoke/data.hpp"
#include "stoke/prefetch.hpp"
#include "stoke/profile.hpp"

namespace stoke::detail {

class PrefetchRings;  // lib/prefetch/ring.hpp

// One epoch of `loader` from batch `first_batch` (a resumed epoch) up to
// `max_batches` (0 = the whole epoch): on a GPU backend into its device slots,
// handed over on the backend's compute stream (uint8 batches normalized on the
// device). requires: first_batch < the epoch's batches.
PrefetchOptions prefetch_options(const Settings& settings, const Loader& loader,
                                 std::uint64_t epoch, std::uint64_t max_batches, GpuBackend* gpu,
                                 std::uint64_t first_batch = 0);

// Starts the prefetcher in `ring`; its batch b is the loader's batch
// first_batch + b. A backend may bring the prefetcher's device handle (test
// doubles); otherwise po.device is opened. With `rings` the slots (staging,
// device buffers, events) are borrowed from there, built on first use and
// kept for the next pass; without, the prefetcher builds its own.
void open_prefetcher(std::optional<Prefetcher>& ring, const PrefetchOptions& po, Loader& loader,
                     const Backend& backend, std::uint64_t first_batch = 0,
                     PrefetchRings* rings = nullptr);

// The batch into x and labels: a device-to-device copy from the slot on a
// GPU, an upload from the host slot otherwise.
void copy_batch_in(Backend& backend, const Batch& batch, Tensor& x, Tensor& labels);

// The pool's and the staging's figures for the epoch's profile (the advisor's
// pool-hoarding, batch-too-small and transfer-bound rules read them).
MemoryFigures memory_figures(const Backend& backend, GpuBackend* gpu,
                             const PrefetchStats& prefetch);

float read_scalar(const Tensor& t);

// Marks one step's work on the GPU's compute stream as device-busy time and
// hands the intervals completed so far to the profiler (no host sync).
class DeviceBusySpan {
 public:
  DeviceBusySpan(GpuBackend* gpu, Profiler& profiler);
  ~DeviceBusySpan() { end(); }
  // Right after the step's last op is issued: a stop event recorded later
  // (after a logging sync) would count the idle stream as busy.
  void end() noexcept;
  DeviceBusySpan(const DeviceBusySpan&) = delete;
  DeviceBusySpan& operator=(const DeviceBusySpan&) = delete;

 private:
  GpuBackend* gpu_;
  Profiler& profiler_;
};

}  // namespace stoke::detail
