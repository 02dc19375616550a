// The prefetch ring's memory, apart from the producer that fills it: per slot
// a host staging buffer (pinned where allowed) and, on CUDA, the transport's
// device buffers at fixed addresses with their events and the copy stream.
//
// A Prefetcher either builds its own ring or borrows one. A trainer keeps its
// rings for the whole fit (PrefetchRings): every epoch's and every validation
// pass's prefetcher fills the same slots, so nothing is pinned, allocated on
// the device or created again, and a CUDA graph that captured a slot's device
// address stays valid from one epoch to the next.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cuda_device_api.hpp"
#include "prefetch/transport.hpp"
#include "stoke/export.hpp"
#include "stoke/memory.hpp"
#include "stoke/prefetch.hpp"

namespace stoke::detail {

class STOKE_INTERNAL PrefetchRing {
 public:
  // Allocates and touches options.depth slots for batches of
  // options.batch_size samples of options.sample_bytes; device buffers and
  // events on `device` (null: the CPU path, host slots only).
  PrefetchRing(const PrefetchOptions& options, std::shared_ptr<CudaDevice> device);
  // Waits for the device (uploads and consumer uses still queued) before the
  // buffers go.
  ~PrefetchRing();
  PrefetchRing(const PrefetchRing&) = delete;
  PrefetchRing& operator=(const PrefetchRing&) = delete;

  // Why a prefetcher with `options` cannot run on this ring (a different slot
  // layout, device, stream, pinning, normalize or device memory); "" when it
  // can. The epoch range and batch count may differ.
  std::string mismatch(const PrefetchOptions& options) const;

  // One prefetcher at a time: lend() throws InvalidArgument while the ring is
  // lent (a Batch of the previous prefetcher still held); give_back() when
  // that prefetcher's state is gone.
  void lend();
  void give_back() noexcept;
  bool lent() const noexcept { return lent_.load(); }

  int depth() const noexcept { return static_cast<int>(staging_buffers_.size()); }
  std::size_t image_capacity() const noexcept { return image_capacity_; }
  std::size_t label_offset() const noexcept { return label_offset_; }
  std::byte* staging(int slot) const noexcept {
    return staging_buffers_[static_cast<std::size_t>(slot)].data();
  }
  SlotTransport& transport() const noexcept { return *transport_; }
  StagingReport staging_report() const { return host_staging_->report(); }

 private:
  PrefetchOptions options_;  // the layout it was built for
  int device_index_ = -1;    // -1: the CPU path
  std::size_t image_capacity_ = 0;
  std::size_t label_offset_ = 0;
  std::unique_ptr<HostStaging> host_staging_;
  std::vector<StagingBuffer> staging_buffers_;  // images, then labels at label_offset_
  std::unique_ptr<SlotTransport> transport_;
  std::atomic<bool> lent_{false};  // given back on whichever thread drops the prefetcher
};

// A trainer's rings for one fit: one per slot layout, built at its first use
// and lent to every later prefetcher of that layout. Training and validation
// share one when their batches match (the same batch size and sample), since
// they never run at once. clear() (the batch size changed, or the fit ended)
// frees them; nothing else does.
class STOKE_INTERNAL PrefetchRings {
 public:
  // An idle ring that fits `options`, else a new one on `device` (null: the
  // CPU path; otherwise the device options.device names).
  std::shared_ptr<PrefetchRing> acquire(const PrefetchOptions& options,
                                        std::shared_ptr<CudaDevice> device);
  void clear() noexcept { rings_.clear(); }
  std::size_t size() const noexcept { return rings_.size(); }
  std::uint64_t built() const noexcept { return built_; }  // rings built so far

 private:
  std::vector<std::shared_ptr<PrefetchRing>> rings_;
  std::uint64_t built_ = 0;
};

}  // namespace stoke::detail
