// The cache of deterministic-stage results (fixed-size uint8 images, one per
// dataset sample): in RAM up to a budget, or in a file written once during
// the first epoch and memory-mapped on later epochs and runs.
//
// File layout: a 4 KiB header (magic, version, key, count, entry size,
// complete flag, payload checksum, header checksum), the entries back to back,
// then one checksum per entry. A file is reused only when every field matches,
// it is complete, its size is exact and every entry's checksum verifies;
// otherwise it is rebuilt and the reason is kept in note().
//
// Thread-safety: concurrent reserve/commit/find for distinct indices; one
// writer per index at a time (the loader processes an index once per batch).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "stoke/config.hpp"
#include "stoke/export.hpp"

namespace stoke::data_detail {

class STOKE_INTERNAL SampleCache {
 public:
  virtual ~SampleCache() = default;

  // nullptr for CacheSpec::Kind::kOff.
  static std::unique_ptr<SampleCache> create(const CacheSpec& spec, std::size_t count,
                                             std::size_t entry_bytes, std::uint64_t key);

  // The entry for `index` once committed, else nullptr.
  virtual const std::uint8_t* find(std::size_t index) const = 0;
  // Space to write the entry for `index`, or nullptr when the budget is spent.
  virtual std::uint8_t* reserve(std::size_t index) = 0;
  // Publishes a reserved entry (after it is fully written).
  virtual void commit(std::size_t index) = 0;

  virtual std::size_t entries() const = 0;
  virtual std::size_t bytes() const = 0;
  // File cache: whether a valid file was found and reused, and why not.
  virtual bool reused() const { return false; }
  virtual std::string note() const { return {}; }
};

// 64-bit checksum over bytes (four multiply-rotate lanes; fast, not
// cryptographic: it guards against truncation and stale or torn files).
STOKE_INTERNAL std::uint64_t checksum64(const void* data, std::size_t bytes) noexcept;

}  // namespace stoke::data_detail
