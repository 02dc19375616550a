// Content hash and dHash; see image_hash.hpp.
#include "core/image_hash.hpp"

#include <bit>
#include <string>

#include "stoke/error.hpp"

namespace stoke::detail {

std::uint64_t content_hash(std::span<const std::uint8_t> bytes, std::uint64_t seed) noexcept {
  constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;
  std::uint64_t h = seed;
  for (const std::uint8_t b : bytes) h = (h ^ b) * kFnvPrime;
  return h;
}

std::uint64_t difference_hash(std::span<const std::uint8_t> gray) {
  if (gray.size() != static_cast<std::size_t>(kDhashWidth) * kDhashHeight) {
    throw InvalidArgument("difference_hash: " + std::to_string(gray.size()) +
                          " samples, not the 9 x 8 thumbnail");
  }
  std::uint64_t hash = 0;
  for (int y = 0; y < kDhashHeight; ++y) {
    const std::uint8_t* row = gray.data() + static_cast<std::size_t>(y) * kDhashWidth;
    for (int x = 0; x + 1 < kDhashWidth; ++x) {
      if (row[x] > row[x + 1]) hash |= std::uint64_t{1} << (y * 8 + x);
    }
  }
  return hash;
}

int hamming_distance(std::uint64_t a, std::uint64_t b) noexcept {
  return std::popcount(a ^ b);
}

}  // namespace stoke::detail
