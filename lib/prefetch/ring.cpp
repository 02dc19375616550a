#include "prefetch/ring.hpp"

#include <algorithm>

#include "stoke/error.hpp"

namespace stoke::detail {
namespace {

std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

bool same_normalize(const DeviceNormalize& a, const DeviceNormalize& b) {
  if (a.enabled != b.enabled) return false;
  if (!a.enabled) return true;
  return a.height == b.height && a.width == b.width && a.channels == b.channels &&
         a.mean == b.mean && a.std == b.std && a.jit == b.jit;
}

}  // namespace

PrefetchRing::PrefetchRing(const PrefetchOptions& options, std::shared_ptr<CudaDevice> device)
    : options_(options), device_index_(device ? device->index() : -1) {
  image_capacity_ = options.sample_bytes * options.batch_size;
  label_offset_ = round_up(image_capacity_, kPoolAlignment);
  Settings staging_settings;
  // Pinning only serves uploads: without a device it is not a fallback.
  staging_settings.host_pinned = options.host_pinned && device != nullptr;
  staging_settings.host_pinned_max = options.host_pinned_max;
  host_staging_ = std::make_unique<HostStaging>(staging_settings, device);
  staging_buffers_.resize(static_cast<std::size_t>(options.depth));
  for (auto& buffer : staging_buffers_) {
    buffer = host_staging_->allocate(label_offset_ + options.batch_size * sizeof(std::int32_t));
  }
  transport_ = device
                   ? make_cuda_transport(device, options.depth, image_capacity_, options.batch_size,
                                         options.gpu_streams, options.compute_stream,
                                         options.device_normalize, options.device_memory)
                   : std::make_unique<SlotTransport>();
}

PrefetchRing::~PrefetchRing() {
  // The transport waits for the device before the staging buffers go.
  transport_.reset();
  staging_buffers_.clear();
}

std::string PrefetchRing::mismatch(const PrefetchOptions& o) const {
  const PrefetchOptions& r = options_;
  const int index = o.device < 0 ? -1 : o.device;
  if (o.sample_bytes != r.sample_bytes || o.batch_size != r.batch_size || o.depth != r.depth) {
    return "slots of " + std::to_string(r.depth) + " x " + std::to_string(r.batch_size) + " x " +
           std::to_string(r.sample_bytes) + " bytes, asked for " + std::to_string(o.depth) + " x " +
           std::to_string(o.batch_size) + " x " + std::to_string(o.sample_bytes);
  }
  if (index != device_index_) {
    return "device " + std::to_string(device_index_) + ", asked for " + std::to_string(index);
  }
  if (index >= 0 && (o.gpu_streams != r.gpu_streams || o.compute_stream != r.compute_stream ||
                     o.device_memory != r.device_memory)) {
    return "another compute stream, copy stream setting or device memory";
  }
  if (index >= 0 && (o.host_pinned != r.host_pinned || o.host_pinned_max != r.host_pinned_max)) {
    return "another pinning setting (STOKE_HOST_PINNED, STOKE_HOST_PINNED_MAX)";
  }
  if (index >= 0 && !same_normalize(o.device_normalize, r.device_normalize)) {
    return "another device normalize";
  }
  return "";
}

void PrefetchRing::lend() {
  bool expected = false;
  if (!lent_.compare_exchange_strong(expected, true)) {
    throw InvalidArgument(
        "Prefetcher: its ring is still lent to an earlier prefetcher (a Batch of it is still "
        "held); release every batch before starting the next pass");
  }
}

void PrefetchRing::give_back() noexcept {
  lent_.store(false);
}

std::shared_ptr<PrefetchRing> PrefetchRings::acquire(const PrefetchOptions& options,
                                                     std::shared_ptr<CudaDevice> device) {
  for (const auto& ring : rings_) {
    if (!ring->lent() && ring->mismatch(options).empty()) return ring;
  }
  rings_.push_back(std::make_shared<PrefetchRing>(options, std::move(device)));
  ++built_;
  return rings_.back();
}

}  // namespace stoke::detail
