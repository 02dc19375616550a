// The CPU backend's host allocator until the memory pool lands: 64-byte
// aligned blocks, counting bytes in use and the peak. It is the one seam the
// pool replaces (CpuBackend::allocate/free call only these two functions).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "stoke/backend.hpp"
#include "stoke/export.hpp"

namespace stoke::cpu {

class STOKE_INTERNAL CountingAllocator {
 public:
  // cap: the most bytes in use at once; 0 = only what the system gives.
  explicit CountingAllocator(std::uint64_t cap = 0) : cap_(cap) {}
  void* allocate(std::size_t bytes);  // OutOfMemory over the cap or on failure
  void free(void* ptr, std::size_t bytes) noexcept;
  MemoryStats stats() const noexcept;
  void reset_peak() noexcept;
  std::uint64_t cap() const noexcept { return cap_; }
  // Every allocation served so far (MemoryStats counts the live ones only),
  // so a test can see a block taken and given back within a step.
  std::uint64_t total_allocations() const noexcept { return total_.load(); }

 private:
  std::uint64_t cap_;
  std::atomic<std::uint64_t> in_use_{0};
  std::atomic<std::uint64_t> peak_{0};
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> total_{0};
};

}  // namespace stoke::cpu
