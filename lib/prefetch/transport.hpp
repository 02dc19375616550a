// How a ring slot's batch reaches the consumer: nothing to do on the CPU, an
// upload on a copy stream with events on CUDA. The prefetcher calls
// before_fill/after_fill on its producer thread and before_use/after_use on
// the consumer's thread, never two calls for the same slot at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpu/cuda_device_api.hpp"
#include "stoke/memory.hpp"
#include "stoke/prefetch.hpp"

namespace stoke::detail {

class SlotTransport {
 public:
  virtual ~SlotTransport() = default;
  // The slot's device buffers (fixed for the transport's life); null on the CPU.
  virtual void* device_images(int /*slot*/) const { return nullptr; }
  virtual std::int32_t* device_labels(int /*slot*/) const { return nullptr; }
  // Before the producer writes the slot's host buffer: its last upload is done.
  virtual void before_fill(int /*slot*/) {}
  // After the producer wrote it: start the upload of `image_bytes` and `labels`.
  virtual void after_fill(int /*slot*/, const std::byte* /*images*/, std::size_t /*image_bytes*/,
                          const std::int32_t* /*labels*/, std::size_t /*label_count*/) {}
  // Before the consumer gets the slot: its work will see the upload.
  virtual void before_use(int /*slot*/) {}
  // When the consumer hands it back: the next upload waits for its work.
  virtual void after_use(int /*slot*/) noexcept {}
  virtual double copy_seconds() const { return 0.0; }
  virtual std::uint64_t bytes_copied() const { return 0; }
};

// Requires: device not null. Device buffers of `image_capacity` +
// `label_capacity` int32 per slot (plus the float images when normalizing).
// `streams` false: copies on the compute stream. `memory` not null: the
// device buffers come from memory->allocate() (its capped pool).
std::unique_ptr<SlotTransport> make_cuda_transport(std::shared_ptr<CudaDevice> device, int slots,
                                                   std::size_t image_capacity,
                                                   std::size_t label_capacity, bool streams,
                                                   StreamHandle compute_stream,
                                                   const DeviceNormalize& normalize,
                                                   Backend* memory = nullptr);

}  // namespace stoke::detail
