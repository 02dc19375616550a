// Portable, seedable randomness for splits, shuffles and augmentation. The
// standard distributions are implementation-defined, so the same seed could
// give different splits on different standard libraries; these do not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace stoke::data_detail {

__extension__ typedef unsigned __int128 Uint128;

constexpr std::uint64_t splitmix64(std::uint64_t z) noexcept {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A stream keyed by several values: hash_seed(seed, epoch, sample).
constexpr std::uint64_t hash_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) noexcept {
  return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c);
}

class Rng {
 public:
  explicit constexpr Rng(std::uint64_t seed) noexcept : state_(seed) {}
  constexpr std::uint64_t next() noexcept {
    state_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (multiply-shift; bias below 2^-32 for n < 2^32).
  std::uint64_t below(std::uint64_t n) noexcept {
    return static_cast<std::uint64_t>((static_cast<Uint128>(next()) * n) >> 64);
  }
  // Uniform in [0, 1) with 24 bits, exactly representable as float.
  float unit() noexcept { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  template <class It>
  void shuffle(It first, It last) noexcept {
    const auto n = static_cast<std::uint64_t>(last - first);
    for (std::uint64_t i = n; i > 1; --i) std::swap(first[i - 1], first[below(i)]);
  }

 private:
  std::uint64_t state_;
};

// FNV-1a for identities (names, small records).
constexpr std::uint64_t fnv1a(const void* data, std::size_t size,
                              std::uint64_t hash = 0xCBF29CE484222325ull) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ p[i]) * 0x100000001B3ull;
  return hash;
}

}  // namespace stoke::data_detail
