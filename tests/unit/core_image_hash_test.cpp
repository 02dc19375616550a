// The duplicate-image hashes (core/image_hash.hpp): dHash bits against a
// plain reference, Hamming distance, and the content hash's known values.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string_view>

#include "core/image_hash.hpp"
#include "stoke/error.hpp"

namespace {

using stoke::detail::content_hash;
using stoke::detail::difference_hash;
using stoke::detail::hamming_distance;

using Thumb = std::array<std::uint8_t, 9 * 8>;

// Plain reference: the bit string built row by row, left to right.
std::uint64_t reference_dhash(const Thumb& g) {
  std::uint64_t hash = 0;
  int bit = 0;
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x, ++bit)
      if (g[static_cast<std::size_t>(y * 9 + x)] > g[static_cast<std::size_t>(y * 9 + x + 1)])
        hash |= std::uint64_t{1} << bit;
  return hash;
}

Thumb random_thumb(std::mt19937& rng) {
  Thumb g{};
  for (auto& v : g) v = static_cast<std::uint8_t>(rng() & 255);
  return g;
}

TEST(ImageHash, DifferenceHashMatchesReferenceOnRandomThumbnails) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 200; ++trial) {
    const Thumb g = random_thumb(rng);
    EXPECT_EQ(difference_hash(g), reference_dhash(g)) << "trial " << trial;
  }
}

TEST(ImageHash, DifferenceHashOfFlatAndOfFallingRows) {
  Thumb flat{};
  flat.fill(128);
  EXPECT_EQ(difference_hash(flat), 0u);  // equal neighbours: no bit
  Thumb falling{};
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 9; ++x)
      falling[static_cast<std::size_t>(y * 9 + x)] = static_cast<std::uint8_t>(200 - x);
  EXPECT_EQ(difference_hash(falling), ~std::uint64_t{0});
  // One brighter sample sets only its own bit (brighter than its right neighbour).
  Thumb spot = flat;
  spot[2 * 9 + 4] = 129;
  EXPECT_EQ(difference_hash(spot), std::uint64_t{1} << (2 * 8 + 4));
}

TEST(ImageHash, DifferenceHashIgnoresUniformBrightnessShift) {
  std::mt19937 rng(7);
  Thumb g = random_thumb(rng);
  for (auto& v : g) v = static_cast<std::uint8_t>(v / 2);
  Thumb brighter = g;
  for (auto& v : brighter) v = static_cast<std::uint8_t>(v + 60);
  EXPECT_EQ(hamming_distance(difference_hash(g), difference_hash(brighter)), 0);
}

TEST(ImageHash, DifferenceHashRefusesAnotherThumbnailSize) {
  const std::array<std::uint8_t, 8 * 8> small{};
  EXPECT_THROW(difference_hash(small), stoke::InvalidArgument);
}

TEST(ImageHash, HammingDistanceCountsDifferingBits) {
  EXPECT_EQ(hamming_distance(0, 0), 0);
  EXPECT_EQ(hamming_distance(0, ~std::uint64_t{0}), 64);
  EXPECT_EQ(hamming_distance(0b1011, 0b0110), 3);
  EXPECT_EQ(hamming_distance(std::uint64_t{1} << 63, 1), 2);
}

TEST(ImageHash, ContentHashIsFnv1a64) {
  const auto bytes = [](std::string_view s) {
    return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(content_hash(bytes("")), 0xcbf29ce484222325ull);
  EXPECT_EQ(content_hash(bytes("a")), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(content_hash(bytes("foobar")), 0x85944171f73967e8ull);
  // Chained: hashing in two parts gives the hash of the whole.
  EXPECT_EQ(content_hash(bytes("bar"), content_hash(bytes("foo"))), content_hash(bytes("foobar")));
  EXPECT_NE(content_hash(bytes("ab")), content_hash(bytes("ba")));
}

}  // namespace
