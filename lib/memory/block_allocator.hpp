// The pool's bookkeeping: best fit with coalescing over address ranges
// ("chunks") it never dereferences. Not thread-safe; MemoryPool locks around it.
//
// Two ordered indexes: every block by address (to find neighbours when
// coalescing) and free blocks by (size, address) (best fit = lower_bound).
// Tree nodes are recycled through node handles, so steady-state alloc/free
// does no heap allocation of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
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

  // Requires: alignment is a power of two.
  explicit BlockAllocator(std::size_t alignment = 256);

  // Requires: base is aligned, size a non-zero multiple of the alignment, the
  // range overlaps no other chunk. Blocks never coalesce across chunks.
  void add_chunk(std::uintptr_t base, std::size_t size);

  // Best fit. Returns 0 when no free block holds round_up(bytes) (0 -> alignment).
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

  std::size_t round_up(std::size_t bytes) const noexcept;
  std::size_t alignment() const noexcept { return alignment_; }
  std::uint64_t reserved() const noexcept { return reserved_; }
  std::uint64_t in_use() const noexcept { return in_use_; }
  std::uint64_t peak_in_use() const noexcept { return peak_in_use_; }
  void reset_peak() noexcept { peak_in_use_ = in_use_; }
  std::uint64_t pending_bytes() const noexcept { return pending_bytes_; }
  std::uint64_t free_bytes() const noexcept { return reserved_ - in_use_ - pending_bytes_; }
  std::uint64_t largest_free_block() const noexcept;
  std::uint64_t live_allocations() const noexcept { return live_; }
  std::uint64_t total_allocations() const noexcept { return total_; }
  std::size_t free_block_count() const noexcept { return free_by_size_.size(); }
  std::size_t pending_count() const noexcept { return pending_.size(); }
  std::size_t chunk_count() const noexcept { return chunks_.size(); }
  // Rounded size of a live block; 0 if `address` is not one.
  std::size_t block_size(std::uintptr_t address) const;

 private:
  enum class State : std::uint8_t { kFree, kUsed, kPending };
  struct Block {
    std::size_t size = 0;
    std::uintptr_t chunk = 0;  // base of the chunk the block lies in
    State state = State::kFree;
  };
  using BlockMap = std::map<std::uintptr_t, Block>;
  using FreeSet = std::set<std::pair<std::size_t, std::uintptr_t>>;

  BlockMap::iterator insert_block(std::uintptr_t address, const Block& block);
  void erase_block(BlockMap::iterator it);
  void insert_free(std::size_t size, std::uintptr_t address);
  void erase_free(std::size_t size, std::uintptr_t address);
  BlockMap::iterator live_block(std::uintptr_t address, const char* operation);
  // Marks a used/pending block free and merges it with free neighbours.
  void release(BlockMap::iterator it);

  std::size_t alignment_;
  BlockMap blocks_;
  FreeSet free_by_size_;
  std::map<std::uintptr_t, std::size_t> chunks_;  // base -> size
  std::vector<std::pair<std::uintptr_t, std::uint64_t>> pending_;  // address, fence
  std::vector<BlockMap::node_type> spare_blocks_;
  std::vector<FreeSet::node_type> spare_free_;
  std::uint64_t reserved_ = 0;
  std::uint64_t in_use_ = 0;
  std::uint64_t peak_in_use_ = 0;
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t live_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace stoke::detail
