// Staging buffers: pinned through the plugin while allowed, pageable otherwise,
// with one warning per HostStaging and the reason kept for reports.
#include <cstring>
#include <new>

#include "gpu/cuda_device.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/memory.hpp"
#include "stoke/system.hpp"

namespace stoke {

void StagingBuffer::reset() noexcept {
  if (data_) {
    if (pinned_) {
      device_->pinned_free(data_);
      if (pinned_total_) pinned_total_->fetch_sub(bytes_);
    } else {
      ::operator delete (data_, std::align_val_t{kPoolAlignment});
    }
  }
  device_.reset();
  pinned_total_.reset();
  data_ = nullptr;
  bytes_ = 0;
  pinned_ = false;
}

void StagingBuffer::swap(StagingBuffer& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  std::swap(pinned_, other.pinned_);
  std::swap(pinned_total_, other.pinned_total_);
}

HostStaging::HostStaging(const Settings& settings, int device)
    : pinned_total_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
  report_.pinning_requested = settings.host_pinned;
  report_.pinned_cap = settings.host_pinned_max;
  if (!settings.host_pinned) return;
  if (device < 0) {
    open_error_ = "no CUDA device in use";
    return;
  }
  device_ = detail::try_open_cuda_device(device, &open_error_);
}

HostStaging::HostStaging(const Settings& settings, std::shared_ptr<detail::CudaDevice> device)
    : device_(std::move(device)), pinned_total_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
  report_.pinning_requested = settings.host_pinned;
  report_.pinned_cap = settings.host_pinned_max;
  if (!device_) open_error_ = "no CUDA device in use";
}

HostStaging::~HostStaging() = default;

void HostStaging::fall_back_locked(const std::string& reason) {
  if (!report_.fell_back) {
    log_warn("staging buffers fall back to pageable host memory: " + reason +
             ". Host->device copies will be slower and synchronous.");
    report_.fell_back = true;
    report_.fallback_reason = reason;
  }
}

StagingBuffer HostStaging::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  StagingBuffer buffer;
  buffer.bytes_ = bytes;
  ++report_.buffers;
  if (report_.pinning_requested) {
    std::string why;
    if (!device_) {
      why = "pinning unavailable (" + open_error_ + ")";
    } else if (pinned_total_->load() + bytes > report_.pinned_cap) {
      why = "pinned total would exceed STOKE_HOST_PINNED_MAX=" + format_bytes(report_.pinned_cap) +
            " (" + format_bytes(pinned_total_->load()) + " pinned, " + format_bytes(bytes) +
            " requested)";
    } else {
      void* p = nullptr;
      try {
        p = device_->pinned_alloc(bytes);
        if (!p) why = "cudaHostAlloc refused " + format_bytes(bytes) + " (locked-memory limit?)";
      } catch (const std::exception& e) {
        why = std::string("pinned allocation failed: ") + e.what();
      }
      if (p) {
        buffer.data_ = static_cast<std::byte*>(p);
        buffer.pinned_ = true;
        buffer.device_ = device_;
        buffer.pinned_total_ = pinned_total_;
        pinned_total_->fetch_add(bytes);
      }
    }
    if (!buffer.pinned_) fall_back_locked(why);
  }
  if (!buffer.data_) {
    void* p =
        ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{kPoolAlignment}, std::nothrow);
    if (!p) {
      throw OutOfMemory("cannot allocate a staging buffer of " + format_bytes(bytes) +
                            " of host memory; use a smaller batch or input size",
                        bytes, 0, pinned_total_->load() + report_.pageable_bytes);
    }
    buffer.data_ = static_cast<std::byte*>(p);
    report_.pageable_bytes += bytes;
  }
  // Touch every page once now, so the first batch does not pay page faults.
  std::memset(buffer.data_, 0, bytes);
  return buffer;
}

StagingReport HostStaging::report() const {
  std::lock_guard lock(mutex_);
  StagingReport r = report_;
  r.pinned_bytes = pinned_total_->load();
  return r;
}

std::string HostStaging::report_text() const {
  const StagingReport r = report();
  std::string text = "staging: " + std::to_string(r.buffers) + " buffers, " +
                     format_bytes(r.pinned_bytes) + " pinned (cap " + format_bytes(r.pinned_cap) +
                     "), " + format_bytes(r.pageable_bytes) + " pageable";
  if (!r.pinning_requested) text += "; pinning off (STOKE_HOST_PINNED=off)";
  if (r.fell_back) text += "; fell back to pageable: " + r.fallback_reason;
  return text;
}

}  // namespace stoke
