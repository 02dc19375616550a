#include "backend/cpu/counting_allocator.hpp"

#include <cstdlib>
#include <string>

#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {
constexpr std::size_t kAlignment = 64;  // a cache line; also AVX-512 aligned
}

void* CountingAllocator::allocate(std::size_t bytes) {
  if (cap_ != 0) {
    // Reserve first so that concurrent allocations cannot overshoot together.
    const std::uint64_t before = in_use_.fetch_add(bytes);
    in_use_.fetch_sub(bytes);
    if (before + bytes > cap_) {
      throw OutOfMemory("cpu backend: cannot allocate " + std::to_string(bytes) +
                            " bytes: " + std::to_string(before) + " of the " +
                            std::to_string(cap_) + "-byte host memory cap are in use (peak " +
                            std::to_string(peak_.load()) +
                            "); use a smaller batch size (or batch size auto) or raise the cap",
                        bytes, cap_, before);
    }
  }
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!p) {
    throw OutOfMemory("cpu backend: host allocation of " + std::to_string(bytes) +
                          " bytes failed with " + std::to_string(in_use_.load()) +
                          " bytes in use; reduce the batch size",
                      bytes, 0, in_use_.load());
  }
  const std::uint64_t now = in_use_.fetch_add(bytes) + bytes;
  std::uint64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  live_.fetch_add(1);
  total_.fetch_add(1);
  return p;
}

void CountingAllocator::free(void* ptr, std::size_t bytes) noexcept {
  if (!ptr) return;
  std::free(ptr);
  in_use_.fetch_sub(bytes);
  live_.fetch_sub(1);
}

MemoryStats CountingAllocator::stats() const noexcept {
  return MemoryStats{in_use_.load(), peak_.load(), live_.load()};
}

void CountingAllocator::reset_peak() noexcept {
  peak_.store(in_use_.load());
}

}  // namespace stoke::cpu
