// Hashes for finding duplicate images (stoke audit, the train/val duplicate
// check of stoke train): a content hash of the file bytes and the 64-bit
// difference hash (dHash) of a 9x8 grayscale thumbnail. Stateless, shared by
// the library and the `stoke` command (through stoke_tool_text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "stoke/export.hpp"

namespace stoke::detail {

// 64-bit FNV-1a of `bytes`, continuing from `seed`. Not cryptographic: a
// caller that must rule out collisions compares the bytes on a match.
inline constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;
STOKE_INTERNAL std::uint64_t content_hash(std::span<const std::uint8_t> bytes,
                                          std::uint64_t seed = kFnvOffsetBasis) noexcept;

// The dHash thumbnail: kDhashWidth x kDhashHeight gray samples, row-major.
inline constexpr int kDhashWidth = 9;
inline constexpr int kDhashHeight = 8;

// Bit y * 8 + x is set when sample (x, y) is brighter than (x + 1, y): the
// horizontal gradient signs of the thumbnail, which survive re-encoding,
// resizing and small shifts. requires: gray.size() == 9 * 8 (InvalidArgument
// otherwise).
STOKE_INTERNAL std::uint64_t difference_hash(std::span<const std::uint8_t> gray);

// The number of differing bits (0..64).
STOKE_INTERNAL int hamming_distance(std::uint64_t a, std::uint64_t b) noexcept;

}  // namespace stoke::detail
