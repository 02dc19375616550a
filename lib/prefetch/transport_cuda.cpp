// The CUDA side of the prefetch ring, written against the plugin's CudaDevice
// so that libstoke needs no CUDA header. Per slot: a device buffer at a fixed
// address and three events:
//   start, uploaded  recorded around the upload on the copy stream (timing);
//   consumed         recorded on the compute stream when the consumer
//                    releases the slot.
// The copy stream waits for `consumed` before overwriting the device buffer;
// the compute stream waits for `uploaded` before the consumer's work; the
// producer waits (on the host) for `uploaded` before rewriting the staging
// buffer. With streams off the copy runs on the compute stream itself.
#include <atomic>
#include <vector>

#include "prefetch/transport.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::detail {
namespace {

class CudaTransport final : public SlotTransport {
 public:
  CudaTransport(std::shared_ptr<CudaDevice> device, int slots, std::size_t image_capacity,
                std::size_t label_capacity, bool streams, StreamHandle compute_stream,
                const DeviceNormalize& normalize, Backend* memory)
      : device_(std::move(device)),
        compute_(compute_stream),
        normalize_(normalize),
        memory_(memory) {
    label_offset_ = (image_capacity + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment;
    const std::size_t slot_bytes = label_offset_ + label_capacity * sizeof(std::int32_t);
    slot_bytes_ = slot_bytes;
    normalized_bytes_ = image_capacity * sizeof(float);
    slots_.resize(static_cast<std::size_t>(slots));
    try {
      copy_ = streams ? device_->create_stream() : compute_;
      own_stream_ = streams;
      for (auto& slot : slots_) {
        slot.buffer = static_cast<std::byte*>(device_alloc(slot_bytes));
        if (!slot.buffer) {
          throw OutOfMemory("cannot allocate the prefetch ring's device slots (" +
                                std::to_string(slots) + " x " + std::to_string(slot_bytes) +
                                " bytes) on " + device_->name() +
                                "; use a smaller batch or a lower STOKE_PREFETCH_DEPTH",
                            slot_bytes, 0, 0);
        }
        if (normalize_.enabled) {
          // One float per uint8 image byte: (N, C, H, W) of the batch capacity.
          slot.normalized = static_cast<float*>(device_alloc(normalized_bytes_));
          if (!slot.normalized) {
            throw OutOfMemory("cannot allocate the prefetch ring's normalized device images (" +
                                  std::to_string(image_capacity * sizeof(float)) +
                                  " bytes per slot) on " + device_->name() +
                                  "; use a smaller batch or a lower STOKE_PREFETCH_DEPTH",
                              image_capacity * sizeof(float), 0, 0);
          }
        }
        slot.start = device_->create_event(true);
        slot.uploaded = device_->create_event(true);
        slot.consumed = device_->create_event(false);
      }
    } catch (...) {
      teardown();
      throw;
    }
  }

  ~CudaTransport() override { teardown(); }

  void* device_images(int slot) const override {
    return normalize_.enabled ? static_cast<void*>(at(slot).normalized) : at(slot).buffer;
  }
  std::int32_t* device_labels(int slot) const override {
    return reinterpret_cast<std::int32_t*>(at(slot).buffer + label_offset_);
  }

  void before_fill(int index) override {
    Slot& slot = at(index);
    if (!slot.upload_pending) return;
    device_->wait(slot.uploaded);
    slot.upload_pending = false;
    add_copy_time(device_->elapsed_ms(slot.start, slot.uploaded));
  }

  void after_fill(int index, const std::byte* images, std::size_t image_bytes,
                  const std::int32_t* labels, std::size_t label_count) override {
    Slot& slot = at(index);
    // The previous batch in this slot may still be read by the compute stream.
    if (slot.consumed_recorded && own_stream_) device_->stream_wait(copy_, slot.consumed);
    device_->record(slot.start, copy_);
    device_->copy_to_device(slot.buffer, images, image_bytes, copy_);
    device_->copy_to_device(slot.buffer + label_offset_, labels, label_count * sizeof(std::int32_t),
                            copy_);
    if (normalize_.enabled) {
      const auto samples = static_cast<int>(label_count);
      device_->normalize_u8_hwc_to_f32_chw(slot.buffer, slot.normalized, samples, normalize_.height,
                                           normalize_.width, normalize_.channels,
                                           normalize_.mean.data(), normalize_.std.data(),
                                           normalize_.jit, copy_);
    }
    device_->record(slot.uploaded, copy_);
    slot.upload_pending = true;
    bytes_ += image_bytes + label_count * sizeof(std::int32_t);
  }

  void before_use(int index) override {
    if (own_stream_) device_->stream_wait(compute_, at(index).uploaded);
  }

  void after_use(int index) noexcept override {
    Slot& slot = at(index);
    try {
      device_->record(slot.consumed, compute_);
      slot.consumed_recorded = true;
    } catch (const std::exception& e) {
      // Without the event the next upload cannot be ordered after this use:
      // wait for the compute stream instead.
      log_error(std::string("prefetch: recording the release event failed (") + e.what() +
                "); synchronizing the compute stream");
      try {
        device_->synchronize(compute_);
      } catch (...) {
      }
      slot.consumed_recorded = false;
    }
  }

  double copy_seconds() const override { return copy_ms_.load() / 1000.0; }
  std::uint64_t bytes_copied() const override { return bytes_.load(); }

 private:
  struct Slot {
    std::byte* buffer = nullptr;
    float* normalized = nullptr;  // with device normalize: (N, C, H, W)
    GpuEvent start = nullptr;
    GpuEvent uploaded = nullptr;
    GpuEvent consumed = nullptr;
    bool upload_pending = false;
    bool consumed_recorded = false;
  };

  Slot& at(int index) { return slots_[static_cast<std::size_t>(index)]; }
  const Slot& at(int index) const { return slots_[static_cast<std::size_t>(index)]; }

  void add_copy_time(float ms) { copy_ms_.store(copy_ms_.load() + ms); }

  // Waits for every upload and every consumer use still in flight before the
  // buffers go: a stream may still read them.
  void teardown() noexcept {
    for (auto& slot : slots_) {
      try {
        if (slot.upload_pending) {
          device_->wait(slot.uploaded);
          add_copy_time(device_->elapsed_ms(slot.start, slot.uploaded));
        }
        if (slot.consumed_recorded) device_->wait(slot.consumed);
      } catch (const std::exception& e) {
        log_error(std::string("prefetch: waiting for the device at shutdown failed: ") + e.what());
      }
      slot.upload_pending = slot.consumed_recorded = false;
      device_free(slot.buffer, slot_bytes_);
      device_free(slot.normalized, normalized_bytes_);
      device_->destroy_event(slot.start);
      device_->destroy_event(slot.uploaded);
      device_->destroy_event(slot.consumed);
      slot = Slot{};
    }
    if (own_stream_) device_->destroy_stream(copy_);
    own_stream_ = false;
    copy_ = nullptr;
  }

  // From the backend's capped pool when given (it throws OutOfMemory naming
  // the cap), else straight from the device (nullptr when refused).
  void* device_alloc(std::size_t bytes) {
    return memory_ ? memory_->allocate(bytes) : device_->device_alloc(bytes);
  }
  void device_free(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    if (memory_) {
      memory_->free(p, bytes);
    } else {
      device_->device_free(p);
    }
  }

  std::shared_ptr<CudaDevice> device_;
  StreamHandle compute_ = nullptr;
  DeviceNormalize normalize_;
  Backend* memory_ = nullptr;
  std::size_t slot_bytes_ = 0;
  std::size_t normalized_bytes_ = 0;
  GpuStream copy_ = nullptr;
  bool own_stream_ = false;
  std::size_t label_offset_ = 0;
  std::vector<Slot> slots_;
  std::atomic<double> copy_ms_{0.0};
  std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace

std::unique_ptr<SlotTransport> make_cuda_transport(std::shared_ptr<CudaDevice> device, int slots,
                                                   std::size_t image_capacity,
                                                   std::size_t label_capacity, bool streams,
                                                   StreamHandle compute_stream,
                                                   const DeviceNormalize& normalize,
                                                   Backend* memory) {
  return std::make_unique<CudaTransport>(std::move(device), slots, image_capacity, label_capacity,
                                         streams, compute_stream, normalize, memory);
}

}  // namespace stoke::detail
