// The prefetcher: an N-deep ring of batch slots between a producer (the
// preprocessing pipeline) and the consumer (the train step), so that the next
// batches are prepared, and on CUDA uploaded, while the current one is used.
//
// A producer thread calls fill_batch for batch k into slot k mod N while the
// consumer holds earlier slots. On CUDA each slot is a staging buffer (pinned
// where allowed) plus a device buffer whose address is fixed for the
// prefetcher's life (so a captured CUDA graph can read from it); the upload
// runs on a copy stream, and events hand the slot over (the compute stream
// waits for the upload) and back (the next upload into the slot waits for the
// compute stream's use of it). On the CPU backend there is no copy; the ring
// still lets producer and consumer overlap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "stoke/config.hpp"
#include "stoke/export.hpp"
#include "stoke/memory.hpp"

namespace stoke {

class Backend;

// Writes batch `batch_index` of `epoch` into `images` (capacity: batch_size
// samples of sample_bytes each, in the layout the consumer expects) and
// `labels` (capacity batch_size) and returns the samples written: batch_size,
// fewer for a short last batch, 0 to end the epoch early. Runs on the
// prefetcher's producer thread (it may use stoke::parallel_for inside).
// An exception it throws reaches the consumer at next(), after the batches
// before it.
using FillBatch =
    std::function<std::size_t(std::uint64_t epoch, std::uint64_t batch_index,
                              std::span<std::byte> images, std::span<std::int32_t> labels)>;

// Optional on CUDA: the producer writes uint8 HWC samples (sample_bytes =
// height * width * channels), which are uploaded as such (4x fewer bytes than
// float) and turned on the device into float (N, C, H, W) with
// (x / 255 - mean[c]) / std[c], by a kernel NVRTC compiles for the device.
// device_images() then points at the floats. Ignored on the CPU backend.
struct DeviceNormalize {
  bool enabled = false;
  int height = 0;
  int width = 0;
  int channels = 0;  // 1..4
  std::array<float, 4> mean{0.0f, 0.0f, 0.0f, 0.0f};
  std::array<float, 4> std{1.0f, 1.0f, 1.0f, 1.0f};
  // STOKE_GPU_JIT: the kernel NVRTC compiles for the device (true), or the
  // precompiled one (false). The trainer sets it from its settings.
  bool jit = true;
};

struct STOKE_API PrefetchOptions {
  std::size_t sample_bytes = 0;         // bytes of one sample's image data
  std::size_t batch_size = 0;           // samples per (full) batch
  std::uint64_t batches_per_epoch = 0;  // 0: until fill_batch returns 0
  std::uint64_t first_epoch = 0;
  std::uint64_t epochs = 1;
  int depth = 2;                          // STOKE_PREFETCH_DEPTH, [1, 64]
  int device = -1;                        // CUDA device; < 0: CPU backend, no copies
  bool gpu_streams = true;                // STOKE_GPU_STREAMS: off = copies on the compute stream
  StreamHandle compute_stream = nullptr;  // the consumer's CUDA stream (null: legacy stream)
  bool host_pinned = true;                // STOKE_HOST_PINNED
  std::uint64_t host_pinned_max = 512ull << 20;  // STOKE_HOST_PINNED_MAX
  DeviceNormalize device_normalize;
  // Where the device slots (and the normalized images) come from: this
  // backend's allocate()/free(), i.e. its capped pool, so STOKE_GPU_MEM_PERCENT
  // bounds them too; null: straight from the device, outside any cap. Must
  // outlive the prefetcher. The trainer passes its GPU backend.
  Backend* device_memory = nullptr;

  // depth, gpu_streams, host_pinned and host_pinned_max from the settings.
  static PrefetchOptions from_settings(const Settings& settings);
};

struct PrefetchStats {
  std::uint64_t batches = 0;  // handed out by next()
  std::uint64_t samples = 0;
  double wait_seconds = 0.0;  // consumer blocked in next(): starvation
  double max_wait_seconds = 0.0;
  double fill_seconds = 0.0;  // producer time inside fill_batch
  double copy_seconds = 0.0;  // host->device copy time (CUDA events; 0 on the CPU)
  std::uint64_t bytes_copied = 0;
  int depth = 0;
  bool on_device = false;
  bool gpu_streams = false;
  StagingReport staging;
};

STOKE_API std::string format_prefetch_stats(const PrefetchStats& stats);

namespace detail {
class PrefetchState;
class PrefetchRing;
}  // namespace detail

// A batch handed out by next(); the slot returns to the ring when the Batch
// is released or destroyed. Move-only. It keeps the ring's memory alive, so it
// may outlive the Prefetcher.
class STOKE_API Batch {
 public:
  Batch() = default;
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch();

  std::uint64_t epoch() const noexcept { return epoch_; }
  std::uint64_t index() const noexcept { return index_; }  // within the epoch
  std::size_t count() const noexcept { return count_; }    // samples in this batch
  int slot() const noexcept { return slot_; }

  // Host copies (the staging buffer): count * sample_bytes bytes, count labels.
  std::span<std::byte> images() const noexcept { return images_; }
  std::span<std::int32_t> labels() const noexcept { return labels_; }
  // Device copies on CUDA (null on the CPU backend), at the slot's fixed
  // address, ready in stream order on the compute stream.
  void* device_images() const noexcept { return device_images_; }
  std::int32_t* device_labels() const noexcept { return device_labels_; }

  explicit operator bool() const noexcept { return state_ != nullptr; }

  // Hands the slot back. On CUDA the next upload into it waits for the work
  // queued on the compute stream so far.
  void release() noexcept;

 private:
  friend class detail::PrefetchState;
  std::shared_ptr<detail::PrefetchState> state_;
  int slot_ = -1;
  std::uint64_t epoch_ = 0;
  std::uint64_t index_ = 0;
  std::size_t count_ = 0;
  std::span<std::byte> images_;
  std::span<std::int32_t> labels_;
  void* device_images_ = nullptr;
  std::int32_t* device_labels_ = nullptr;
};

class STOKE_API Prefetcher {
 public:
  // Allocates and touches the ring's buffers and starts the producer thread.
  // InvalidArgument for a zero sample size or batch size or a depth outside
  // [1, 64]; Unsupported when options.device names no usable CUDA device.
  Prefetcher(PrefetchOptions options, FillBatch fill);
  // Internal (tests, backends): on an already opened device handle instead of
  // options.device; null runs the CPU path.
  Prefetcher(PrefetchOptions options, FillBatch fill, std::shared_ptr<detail::CudaDevice> device);
  // Internal (the trainer): on a ring built earlier (lib/prefetch/ring.hpp)
  // instead of a new one, so that its staging, device slots and events serve
  // pass after pass. InvalidArgument when the ring was built for another
  // layout or is still lent to a prefetcher whose batches are held.
  Prefetcher(PrefetchOptions options, FillBatch fill, std::shared_ptr<detail::PrefetchRing> ring);
  // Stops the producer (after the fill_batch call in progress, if any) and
  // joins it; batches still held stay valid until released.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch in order, waiting for the producer if it is behind; empty
  // after the last batch. Rethrows the producer's exception once the batches
  // before it were handed out. InvalidArgument when the consumer already holds
  // every slot (release one first, or raise STOKE_PREFETCH_DEPTH).
  std::optional<Batch> next();

  // Stops producing; later next() calls return the batches already prepared,
  // then nothing.
  void stop();

  PrefetchStats stats() const;
  const PrefetchOptions& options() const noexcept { return options_; }

 private:
  PrefetchOptions options_;
  std::shared_ptr<detail::PrefetchState> state_;
};

}  // namespace stoke
