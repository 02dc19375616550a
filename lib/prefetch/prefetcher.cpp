// The prefetch ring: one producer thread, slots handed over in ring order
// under one mutex and two condition variables.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "prefetch/ring.hpp"
#include "prefetch/transport.hpp"
#include "stoke/error.hpp"
#include "stoke/prefetch.hpp"

namespace stoke {
namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

class PrefetchState {
 public:
  enum class SlotState { kFree, kFilling, kReady, kHeld };
  struct Slot {
    SlotState state = SlotState::kFree;
    std::uint64_t epoch = 0;
    std::uint64_t index = 0;
    std::size_t count = 0;
  };

  // On `ring`, lent for this state's life (new slots states, the same memory).
  PrefetchState(const PrefetchOptions& options, FillBatch fill, std::shared_ptr<PrefetchRing> ring)
      : options_(options), fill_(std::move(fill)), ring_(std::move(ring)) {
    ring_->lend();
    image_capacity_ = ring_->image_capacity();
    label_offset_ = ring_->label_offset();
    transport_ = &ring_->transport();
    slots_.resize(static_cast<std::size_t>(ring_->depth()));
    // A borrowed ring's transport counts every pass; this one reports its own.
    copy_seconds_before_ = transport_->copy_seconds();
    bytes_copied_before_ = transport_->bytes_copied();
  }

  ~PrefetchState() {
    // Gone when the Prefetcher and every Batch are: the next pass may have the ring.
    ring_->give_back();
  }

  void start() {
    producer_ = std::thread([this] {
      // Named so that profilers and `top -H` show where the producer's time goes.
      pthread_setname_np(pthread_self(), "stoke-prefetch");
      produce();
    });
  }

  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    producer_cv_.notify_all();
    if (producer_.joinable()) producer_.join();
  }

  void request_stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    producer_cv_.notify_all();
  }

  std::optional<Batch> next(const std::shared_ptr<PrefetchState>& self) {
    const auto start = Clock::now();
    std::unique_lock lock(mutex_);
    Slot& slot = slots_[take_slot_];
    if (slot.state == SlotState::kHeld) {
      throw InvalidArgument("Prefetcher::next(): the consumer already holds all " +
                            std::to_string(slots_.size()) +
                            " slots; release a batch first or raise STOKE_PREFETCH_DEPTH");
    }
    consumer_cv_.wait(lock, [&] { return slot.state == SlotState::kReady || producer_done_; });
    if (slot.state != SlotState::kReady) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    const double waited = seconds_since(start);
    stats_.wait_seconds += waited;
    stats_.max_wait_seconds = std::max(stats_.max_wait_seconds, waited);
    ++stats_.batches;
    stats_.samples += slot.count;
    slot.state = SlotState::kHeld;
    const int index = static_cast<int>(take_slot_);
    take_slot_ = (take_slot_ + 1) % slots_.size();
    lock.unlock();

    transport_->before_use(index);
    Batch batch;
    batch.state_ = self;
    batch.slot_ = index;
    batch.epoch_ = slot.epoch;
    batch.index_ = slot.index;
    batch.count_ = slot.count;
    std::byte* staging = ring_->staging(index);
    batch.images_ = {staging, slot.count * options_.sample_bytes};
    batch.labels_ = {reinterpret_cast<std::int32_t*>(staging + label_offset_), slot.count};
    batch.device_images_ = transport_->device_images(index);
    batch.device_labels_ = transport_->device_labels(index);
    return batch;
  }

  void release(int index) noexcept {
    transport_->after_use(index);
    {
      std::lock_guard lock(mutex_);
      slots_[static_cast<std::size_t>(index)].state = SlotState::kFree;
    }
    producer_cv_.notify_all();
  }

  PrefetchStats stats() const {
    std::lock_guard lock(mutex_);
    PrefetchStats s = stats_;
    s.copy_seconds = transport_->copy_seconds() - copy_seconds_before_;
    s.bytes_copied = transport_->bytes_copied() - bytes_copied_before_;
    s.depth = static_cast<int>(slots_.size());
    s.on_device = transport_->device_images(0) != nullptr;
    s.gpu_streams = s.on_device && options_.gpu_streams;
    s.staging = ring_->staging_report();
    return s;
  }

 private:
  // Returns false when stopped.
  bool produce_one(std::uint64_t epoch, std::uint64_t batch, bool* epoch_ended) {
    std::unique_lock lock(mutex_);
    Slot& slot = slots_[fill_slot_];
    producer_cv_.wait(lock, [&] { return stop_ || slot.state == SlotState::kFree; });
    if (stop_) return false;
    slot.state = SlotState::kFilling;
    const int index = static_cast<int>(fill_slot_);
    lock.unlock();

    std::size_t count = 0;
    try {
      transport_->before_fill(index);
      std::byte* staging = ring_->staging(index);
      auto* labels = reinterpret_cast<std::int32_t*>(staging + label_offset_);
      const auto start = Clock::now();
      count = fill_(epoch, batch, {staging, image_capacity_}, {labels, options_.batch_size});
      const double filled = seconds_since(start);
      if (count > options_.batch_size) {
        throw InvalidArgument("fill_batch for epoch " + std::to_string(epoch) + ", batch " +
                              std::to_string(batch) + " returned " + std::to_string(count) +
                              " samples, more than the batch size " +
                              std::to_string(options_.batch_size));
      }
      if (count > 0) {
        transport_->after_fill(index, staging, count * options_.sample_bytes, labels, count);
      }
      lock.lock();
      stats_.fill_seconds += filled;
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      slot.state = SlotState::kFree;
      throw;
    }
    if (count == 0) {
      slot.state = SlotState::kFree;
      *epoch_ended = true;
      return true;
    }
    slot.epoch = epoch;
    slot.index = batch;
    slot.count = count;
    slot.state = SlotState::kReady;
    fill_slot_ = (fill_slot_ + 1) % slots_.size();
    lock.unlock();
    consumer_cv_.notify_all();
    return true;
  }

  void produce_all() {
    const std::uint64_t last_epoch = options_.first_epoch + options_.epochs;
    for (std::uint64_t epoch = options_.first_epoch; epoch < last_epoch; ++epoch) {
      for (std::uint64_t batch = 0;
           options_.batches_per_epoch == 0 || batch < options_.batches_per_epoch; ++batch) {
        bool epoch_ended = false;
        if (!produce_one(epoch, batch, &epoch_ended)) return;
        if (epoch_ended) break;
      }
    }
  }

  void produce() {
    try {
      produce_all();
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      producer_done_ = true;
    }
    consumer_cv_.notify_all();
  }

  PrefetchOptions options_;
  FillBatch fill_;
  std::shared_ptr<PrefetchRing> ring_;
  std::size_t image_capacity_ = 0;
  std::size_t label_offset_ = 0;
  std::vector<Slot> slots_;
  SlotTransport* transport_ = nullptr;  // the ring's
  double copy_seconds_before_ = 0.0;
  std::uint64_t bytes_copied_before_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable producer_cv_;  // a slot was freed, or stop
  std::condition_variable consumer_cv_;  // a slot is ready, or the producer is done
  std::size_t fill_slot_ = 0;            // next slot the producer fills
  std::size_t take_slot_ = 0;            // next slot the consumer takes
  bool stop_ = false;
  bool producer_done_ = false;
  std::exception_ptr error_;
  PrefetchStats stats_;
  std::thread producer_;
};

}  // namespace detail

PrefetchOptions PrefetchOptions::from_settings(const Settings& settings) {
  PrefetchOptions options;
  options.depth = settings.prefetch_depth;
  options.gpu_streams = settings.gpu_streams;
  options.host_pinned = settings.host_pinned;
  options.host_pinned_max = settings.host_pinned_max;
  return options;
}

namespace {

void validate(const PrefetchOptions& o) {
  if (o.sample_bytes == 0 || o.batch_size == 0) {
    throw InvalidArgument("Prefetcher: sample_bytes (" + std::to_string(o.sample_bytes) +
                          ") and batch_size (" + std::to_string(o.batch_size) +
                          ") must both be positive");
  }
  const DeviceNormalize& dn = o.device_normalize;
  if (dn.enabled) {
    if (dn.channels < 1 || dn.channels > 4 || dn.height < 1 || dn.width < 1 ||
        static_cast<std::size_t>(dn.height) * dn.width * dn.channels != o.sample_bytes) {
      throw InvalidArgument(
          "Prefetcher: device normalize needs 1..4 channels and sample_bytes = "
          "height * width * channels (uint8 HWC); got " +
          std::to_string(dn.height) + "x" + std::to_string(dn.width) + "x" +
          std::to_string(dn.channels) + " for " + std::to_string(o.sample_bytes) + " bytes");
    }
    for (int c = 0; c < dn.channels; ++c) {
      if (!(dn.std[static_cast<std::size_t>(c)] > 0.0f)) {
        throw InvalidArgument("Prefetcher: device normalize std of channel " + std::to_string(c) +
                              " must be positive");
      }
    }
  }
  if (o.depth < 1 || o.depth > 64) {
    throw InvalidArgument("Prefetcher: depth " + std::to_string(o.depth) +
                          " is outside [1, 64] (STOKE_PREFETCH_DEPTH)");
  }
}

std::shared_ptr<detail::CudaDevice> open_for(const PrefetchOptions& o) {
  validate(o);
  return o.device >= 0 ? detail::open_cuda_device(o.device) : nullptr;
}

}  // namespace

Prefetcher::Prefetcher(PrefetchOptions options, FillBatch fill)
    : Prefetcher(options, std::move(fill), open_for(options)) {}

Prefetcher::Prefetcher(PrefetchOptions options, FillBatch fill,
                       std::shared_ptr<detail::CudaDevice> device)
    : options_(std::move(options)) {
  validate(options_);
  if (!fill) throw InvalidArgument("Prefetcher: no fill_batch function");
  auto ring = std::make_shared<detail::PrefetchRing>(options_, std::move(device));
  state_ = std::make_shared<detail::PrefetchState>(options_, std::move(fill), std::move(ring));
  state_->start();
}

Prefetcher::Prefetcher(PrefetchOptions options, FillBatch fill,
                       std::shared_ptr<detail::PrefetchRing> ring)
    : options_(std::move(options)) {
  validate(options_);
  if (!fill) throw InvalidArgument("Prefetcher: no fill_batch function");
  if (!ring) throw InvalidArgument("Prefetcher: no ring to borrow");
  // The ring keeps its own device handle; options_.device names the same device.
  const std::string why = ring->mismatch(options_);
  if (!why.empty()) throw InvalidArgument("Prefetcher: the borrowed ring does not fit: " + why);
  state_ = std::make_shared<detail::PrefetchState>(options_, std::move(fill), std::move(ring));
  state_->start();
}

Prefetcher::~Prefetcher() {
  state_->shutdown();
}

std::optional<Batch> Prefetcher::next() {
  return state_->next(state_);
}

void Prefetcher::stop() {
  state_->request_stop();
}

PrefetchStats Prefetcher::stats() const {
  return state_->stats();
}

Batch::Batch(Batch&& other) noexcept {
  *this = std::move(other);
}

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
    slot_ = std::exchange(other.slot_, -1);
    epoch_ = other.epoch_;
    index_ = other.index_;
    count_ = std::exchange(other.count_, 0);
    images_ = std::exchange(other.images_, {});
    labels_ = std::exchange(other.labels_, {});
    device_images_ = std::exchange(other.device_images_, nullptr);
    device_labels_ = std::exchange(other.device_labels_, nullptr);
  }
  return *this;
}

Batch::~Batch() {
  release();
}

void Batch::release() noexcept {
  if (!state_) return;
  state_->release(slot_);
  state_.reset();
  slot_ = -1;
  count_ = 0;
  images_ = {};
  labels_ = {};
  device_images_ = nullptr;
  device_labels_ = nullptr;
}

std::string format_prefetch_stats(const PrefetchStats& s) {
  std::ostringstream out;
  char line[256];
  std::snprintf(
      line, sizeof line,
      "prefetch: depth %d, %s, %llu batches (%llu samples)\n"
      "  consumer waited %.3f s (max %.3f s per batch), producer filled %.3f s\n"
      "  copies %.3f s for %.1f MiB\n",
      s.depth,
      s.on_device ? (s.gpu_streams ? "CUDA, copy stream" : "CUDA, one stream") : "CPU (no copies)",
      static_cast<unsigned long long>(s.batches), static_cast<unsigned long long>(s.samples),
      s.wait_seconds, s.max_wait_seconds, s.fill_seconds, s.copy_seconds,
      static_cast<double>(s.bytes_copied) / (1 << 20));
  out << line;
  if (s.on_device) {
    out << "  "
        << (s.staging.fell_back ? "staging pageable: " + s.staging.fallback_reason
                                : std::string("staging pinned"))
        << "\n";
  }
  return out.str();
}

}  // namespace stoke
