// The pool's bookkeeping: good-fit allocation with immediate coalescing over
// address ranges ("chunks") it never dereferences, so that it can manage device
// memory. Not thread-safe; MemoryPool locks around it.
//
// Two-level segregated fit (TLSF, Masmano et al. 2004) kept out of band:
// free blocks sit in bins of 32 sub-ranges per power of two, found in O(1)
// through two bitmaps; every block links to its neighbours in address order,
// so freeing coalesces in O(1); live blocks are found by address in a hash
// map. A request is served from the first non-empty bin whose every block is
// large enough (wasting at most 1/32 of the request in bin choice, never in
// the block itself: blocks are split to the 256-rounded size); if that finds
// nothing, the request's own bin is scanned, so a refusal means no free block
// fits.
//
// Optional quick cache (set_quick_cache, used by MemoryPool): a block of at
// most kQuickMaxSize freed with free() is parked, uncoalesced, in a short
// LIFO list and handed out again for the same rounded size without touching
// the bins, the split or the merge. Parked blocks count as free in every
// figure (in use, live, peak); they are merged back (flush_quick) when no
// binned block fits, before take_free_chunks, when the list is full (the
// oldest), and whenever the caller flushes (MemoryPool::stats, trim).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "stoke/export.hpp"

namespace stoke::detail {

class STOKE_INTERNAL BlockAllocator {
 public:
  struct Chunk {
    std::uintptr_t base = 0;
    std::size_t size = 0;
  };

  // Requires: alignment is a power of two >= 64.
  explicit BlockAllocator(std::size_t alignment = 256);
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // Requires: base is aligned, size a non-zero multiple of the alignment, the
  // range overlaps no other chunk. Blocks never coalesce across chunks.
  void add_chunk(std::uintptr_t base, std::size_t size);

  // Returns 0 when no free block holds round_up(bytes) (0 -> alignment).
  std::uintptr_t allocate(std::size_t bytes);

  // Frees a live block now (coalescing with free neighbours) and returns its
  // rounded size. InvalidArgument for an address that is not a live block.
  std::size_t free(std::uintptr_t address);

  // Frees a live block once `fence` has passed: until reclaim() sees it
  // passed, the block is neither free nor in use. Returns its rounded size.
  std::size_t free_after(std::uintptr_t address, std::uint64_t fence);

  // Frees every pending block whose fence `passed` says has passed, calling
  // `released` with each such fence. Returns the number of blocks freed.
  std::size_t reclaim(const std::function<bool(std::uint64_t)>& passed,
                      const std::function<void(std::uint64_t)>& released);

  // Removes every chunk that is one free block and returns them.
  std::vector<Chunk> take_free_chunks();

  // Every chunk, for tearing down.
  std::vector<Chunk> chunks() const;

  static constexpr std::size_t kQuickMaxSize = std::size_t{1} << 20;
  static constexpr int kQuickSlots = 32;
  void set_quick_cache(bool on);  // off: flushes it
  // Merges every parked block back into the bins (exact free-block figures).
  void flush_quick();
  std::size_t quick_count() const noexcept { return quick_count_; }

  std::size_t round_up(std::size_t bytes) const noexcept;
  std::size_t alignment() const noexcept { return alignment_; }
  std::uint64_t reserved() const noexcept { return reserved_; }
  std::uint64_t in_use() const noexcept { return in_use_; }
  std::uint64_t peak_in_use() const noexcept { return peak_in_use_; }
  void reset_peak() noexcept { peak_in_use_ = in_use_; }
  std::uint64_t pending_bytes() const noexcept { return pending_bytes_; }
  std::uint64_t free_bytes() const noexcept { return reserved_ - in_use_ - pending_bytes_; }
  std::uint64_t largest_free_block() const noexcept;  // O(blocks in the top bin)
  std::uint64_t live_allocations() const noexcept { return live_; }
  std::uint64_t total_allocations() const noexcept { return total_; }
  std::size_t free_block_count() const noexcept { return free_blocks_; }
  std::size_t pending_count() const noexcept { return pending_.size(); }
  std::size_t chunk_count() const noexcept { return chunks_.size(); }
  // Rounded size of a live block; 0 if `address` is not one.
  std::size_t block_size(std::uintptr_t address) const;

 private:
  static constexpr int kSubBins = 32;  // per power of two
  static constexpr int kSubBits = 5;
  static constexpr int kBins = 64;

  enum class State : std::uint8_t { kFree, kUsed, kPending, kParked };
  struct Block {
    std::uintptr_t address = 0;
    std::size_t size = 0;
    std::uintptr_t chunk = 0;    // base of the chunk the block lies in
    Block* prev_phys = nullptr;  // neighbours in address order, same chunk
    Block* next_phys = nullptr;
    Block* prev_free = nullptr;  // bin list, while free
    Block* next_free = nullptr;
    State state = State::kFree;
  };

  static std::pair<int, int> bin_of(std::size_t size) noexcept;
  Block* new_block();
  void drop_block(Block* block);
  void insert_free(Block* block);
  void remove_free(Block* block);
  Block* find_fit(std::size_t size);
  Block* live_block(std::uintptr_t address, const char* operation);
  // Makes a used/pending block free and merges it with free neighbours.
  void release(Block* block);

  std::size_t alignment_;
  Block* bins_[kBins][kSubBins] = {};
  std::uint64_t top_bitmap_ = 0;          // bit f: some bins_[f][*] non-empty
  std::uint32_t sub_bitmap_[kBins] = {};  // bit s: bins_[f][s] non-empty
  std::deque<Block> storage_;             // stable addresses
  std::vector<Block*> spare_;             // recycled Block records
  // Used and pending blocks by address: open addressing, linear probing,
  // Fibonacci hashing over a power-of-two table (no division, no nodes).
  class AddressTable {
   public:
    AddressTable();
    void insert(std::uintptr_t address, Block* block);
    Block* find(std::uintptr_t address) const noexcept;
    void erase(std::uintptr_t address) noexcept;  // requires: present

   private:
    std::size_t home(std::uintptr_t address) const noexcept {
      return static_cast<std::size_t>((address * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void grow();
    std::vector<std::pair<std::uintptr_t, Block*>> slots_;  // key 0: empty
    std::size_t count_ = 0;
    int shift_ = 0;
  };
  AddressTable used_;
  struct ChunkInfo {
    std::size_t size = 0;
    Block* first = nullptr;  // the block at the base: never merged away
  };
  std::map<std::uintptr_t, ChunkInfo> chunks_;
  std::vector<std::pair<Block*, std::uint64_t>> pending_;
  bool quick_on_ = false;
  Block* quick_[kQuickSlots] = {};  // oldest first
  int quick_count_ = 0;
  std::size_t free_blocks_ = 0;
  std::uint64_t reserved_ = 0;
  std::uint64_t in_use_ = 0;
  std::uint64_t peak_in_use_ = 0;
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t live_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace stoke::detail
