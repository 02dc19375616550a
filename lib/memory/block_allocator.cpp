#include "memory/block_allocator.hpp"

#include <cstdio>
#include <string>

#include "stoke/error.hpp"

namespace stoke::detail {
namespace {

std::string hex(std::uintptr_t address) {
  char text[2 + 2 * sizeof address + 1];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

}  // namespace

BlockAllocator::BlockAllocator(std::size_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw InvalidArgument("BlockAllocator: alignment " + std::to_string(alignment) +
                          " is not a power of two");
  }
}

std::size_t BlockAllocator::round_up(std::size_t bytes) const noexcept {
  if (bytes == 0) return alignment_;
  return (bytes + alignment_ - 1) & ~(alignment_ - 1);
}

std::uint64_t BlockAllocator::largest_free_block() const noexcept {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

BlockAllocator::BlockMap::iterator BlockAllocator::insert_block(std::uintptr_t address,
                                                                const Block& block) {
  if (spare_blocks_.empty()) return blocks_.emplace(address, block).first;
  auto node = std::move(spare_blocks_.back());
  spare_blocks_.pop_back();
  node.key() = address;
  node.mapped() = block;
  return blocks_.insert(std::move(node)).position;
}

void BlockAllocator::erase_block(BlockMap::iterator it) {
  spare_blocks_.push_back(blocks_.extract(it));
}

void BlockAllocator::insert_free(std::size_t size, std::uintptr_t address) {
  if (spare_free_.empty()) {
    free_by_size_.emplace(size, address);
    return;
  }
  auto node = std::move(spare_free_.back());
  spare_free_.pop_back();
  node.value() = {size, address};
  free_by_size_.insert(std::move(node));
}

void BlockAllocator::erase_free(std::size_t size, std::uintptr_t address) {
  spare_free_.push_back(free_by_size_.extract({size, address}));
}

void BlockAllocator::add_chunk(std::uintptr_t base, std::size_t size) {
  if (size == 0 || size % alignment_ != 0 || base % alignment_ != 0) {
    throw InvalidArgument("BlockAllocator: chunk at " + hex(base) + " of " +
                          std::to_string(size) + " bytes is not aligned to " +
                          std::to_string(alignment_));
  }
  auto next = chunks_.lower_bound(base);
  const bool overlaps_next = next != chunks_.end() && next->first < base + size;
  const bool overlaps_prev = next != chunks_.begin() &&
                             std::prev(next)->first + std::prev(next)->second > base;
  if (overlaps_next || overlaps_prev) {
    throw InvalidArgument("BlockAllocator: chunk at " + hex(base) + " overlaps another chunk");
  }
  chunks_.emplace(base, size);
  insert_block(base, Block{size, base, State::kFree});
  insert_free(size, base);
  reserved_ += size;
}

std::uintptr_t BlockAllocator::allocate(std::size_t bytes) {
  const std::size_t size = round_up(bytes);
  if (size < bytes) return 0;  // overflow
  auto best = free_by_size_.lower_bound({size, 0});
  if (best == free_by_size_.end()) return 0;
  const auto [block_size, address] = *best;
  spare_free_.push_back(free_by_size_.extract(best));

  auto it = blocks_.find(address);
  it->second.state = State::kUsed;
  if (block_size > size) {
    // The remainder stays free; it cannot merge with anything, since its
    // right neighbour was already adjacent to a free block and would have been
    // merged when it was freed.
    it->second.size = size;
    insert_block(address + size, Block{block_size - size, it->second.chunk, State::kFree});
    insert_free(block_size - size, address + size);
  }
  in_use_ += size;
  if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
  ++live_;
  ++total_;
  return address;
}

BlockAllocator::BlockMap::iterator BlockAllocator::live_block(std::uintptr_t address,
                                                              const char* operation) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || it->second.state != State::kUsed) {
    throw InvalidArgument(std::string("memory pool: ") + operation + " of " + hex(address) +
                          ", which is not a live allocation of this pool (double free or "
                          "foreign pointer)");
  }
  return it;
}

void BlockAllocator::release(BlockMap::iterator it) {
  it->second.state = State::kFree;
  const std::uintptr_t chunk = it->second.chunk;
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.state == State::kFree && next->second.chunk == chunk) {
    erase_free(next->second.size, next->first);
    it->second.size += next->second.size;
    erase_block(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.state == State::kFree && prev->second.chunk == chunk) {
      erase_free(prev->second.size, prev->first);
      prev->second.size += it->second.size;
      erase_block(it);
      it = prev;
    }
  }
  insert_free(it->second.size, it->first);
}

std::size_t BlockAllocator::free(std::uintptr_t address) {
  auto it = live_block(address, "free");
  const std::size_t size = it->second.size;
  in_use_ -= size;
  --live_;
  release(it);
  return size;
}

std::size_t BlockAllocator::free_after(std::uintptr_t address, std::uint64_t fence) {
  auto it = live_block(address, "free");
  const std::size_t size = it->second.size;
  it->second.state = State::kPending;
  in_use_ -= size;
  --live_;
  pending_bytes_ += size;
  pending_.emplace_back(address, fence);
  return size;
}

std::size_t BlockAllocator::reclaim(const std::function<bool(std::uint64_t)>& passed,
                                    const std::function<void(std::uint64_t)>& released) {
  std::size_t freed = 0;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const auto [address, fence] = pending_[i];
    if (!passed(fence)) {
      pending_[kept++] = pending_[i];
      continue;
    }
    auto it = blocks_.find(address);
    pending_bytes_ -= it->second.size;
    release(it);
    if (released) released(fence);
    ++freed;
  }
  pending_.resize(kept);
  return freed;
}

std::vector<BlockAllocator::Chunk> BlockAllocator::take_free_chunks() {
  std::vector<Chunk> taken;
  for (auto chunk = chunks_.begin(); chunk != chunks_.end();) {
    auto it = blocks_.find(chunk->first);
    if (it->second.state == State::kFree && it->second.size == chunk->second) {
      erase_free(it->second.size, it->first);
      erase_block(it);
      reserved_ -= chunk->second;
      taken.push_back({chunk->first, chunk->second});
      chunk = chunks_.erase(chunk);
    } else {
      ++chunk;
    }
  }
  return taken;
}

std::vector<BlockAllocator::Chunk> BlockAllocator::chunks() const {
  std::vector<Chunk> all;
  all.reserve(chunks_.size());
  for (const auto& [base, size] : chunks_) all.push_back({base, size});
  return all;
}

std::size_t BlockAllocator::block_size(std::uintptr_t address) const {
  auto it = blocks_.find(address);
  return it != blocks_.end() && it->second.state == State::kUsed ? it->second.size : 0;
}

}  // namespace stoke::detail
