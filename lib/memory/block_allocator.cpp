#include "memory/block_allocator.hpp"

#include <bit>
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

BlockAllocator::AddressTable::AddressTable() : slots_(1024), shift_(64 - 10) {}

void BlockAllocator::AddressTable::grow() {
  std::vector<std::pair<std::uintptr_t, Block*>> old(slots_.size() * 2);
  old.swap(slots_);
  --shift_;
  count_ = 0;
  for (const auto& [key, block] : old) {
    if (key) insert(key, block);
  }
}

void BlockAllocator::AddressTable::insert(std::uintptr_t address, Block* block) {
  if (2 * (count_ + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(address);
  while (slots_[i].first) i = (i + 1) & mask;
  slots_[i] = {address, block};
  ++count_;
}

BlockAllocator::Block* BlockAllocator::AddressTable::find(std::uintptr_t address) const noexcept {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(address); slots_[i].first; i = (i + 1) & mask) {
    if (slots_[i].first == address) return slots_[i].second;
  }
  return nullptr;
}

void BlockAllocator::AddressTable::erase(std::uintptr_t address) noexcept {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(address);
  while (slots_[i].first != address) i = (i + 1) & mask;
  // Backward-shift deletion: pull later entries of the probe run into the
  // hole unless that would move them before their home slot.
  for (std::size_t j = (i + 1) & mask; slots_[j].first; j = (j + 1) & mask) {
    const std::size_t h = home(slots_[j].first);
    if (((j - h) & mask) >= ((j - i) & mask)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = {0, nullptr};
  --count_;
}

BlockAllocator::BlockAllocator(std::size_t alignment) : alignment_(alignment) {
  if (alignment < 64 || (alignment & (alignment - 1)) != 0) {
    throw InvalidArgument("BlockAllocator: alignment " + std::to_string(alignment) +
                          " is not a power of two >= 64");
  }
}

std::size_t BlockAllocator::round_up(std::size_t bytes) const noexcept {
  if (bytes == 0) return alignment_;
  return (bytes + alignment_ - 1) & ~(alignment_ - 1);
}

// Sizes are >= 64, so the top level is >= 6 and the sub-bin step is >= 2.
std::pair<int, int> BlockAllocator::bin_of(std::size_t size) noexcept {
  const int top = std::bit_width(size) - 1;
  const int sub = static_cast<int>(size >> (top - kSubBits)) - kSubBins;
  return {top, sub};
}

BlockAllocator::Block* BlockAllocator::new_block() {
  if (spare_.empty()) return &storage_.emplace_back();
  Block* block = spare_.back();
  spare_.pop_back();
  *block = Block{};
  return block;
}

void BlockAllocator::drop_block(Block* block) {
  spare_.push_back(block);
}

void BlockAllocator::insert_free(Block* block) {
  block->state = State::kFree;
  const auto [top, sub] = bin_of(block->size);
  Block*& head = bins_[top][sub];
  block->prev_free = nullptr;
  block->next_free = head;
  if (head) head->prev_free = block;
  head = block;
  top_bitmap_ |= 1ull << top;
  sub_bitmap_[top] |= 1u << sub;
  ++free_blocks_;
}

void BlockAllocator::remove_free(Block* block) {
  const auto [top, sub] = bin_of(block->size);
  if (block->prev_free) {
    block->prev_free->next_free = block->next_free;
  } else {
    bins_[top][sub] = block->next_free;
    if (!block->next_free) {
      sub_bitmap_[top] &= ~(1u << sub);
      if (!sub_bitmap_[top]) top_bitmap_ &= ~(1ull << top);
    }
  }
  if (block->next_free) block->next_free->prev_free = block->prev_free;
  block->prev_free = block->next_free = nullptr;
  --free_blocks_;
}

BlockAllocator::Block* BlockAllocator::find_fit(std::size_t size) {
  // Every block in a bin at or above the bin of size + one sub-bin step - 1
  // holds `size`: take the first such non-empty bin.
  const int own_top = std::bit_width(size) - 1;
  const std::size_t step = std::size_t{1} << (own_top - kSubBits);
  if (size <= (~std::size_t{0} >> 1)) {
    auto [top, sub] = bin_of(size + step - 1);
    std::uint32_t subs = sub_bitmap_[top] & (~0u << sub);
    if (!subs) {
      const std::uint64_t tops = top + 1 < kBins ? top_bitmap_ & (~0ull << (top + 1)) : 0;
      if (tops) {
        top = std::countr_zero(tops);
        subs = sub_bitmap_[top];
      }
    }
    if (subs) return bins_[top][std::countr_zero(subs)];
  }
  // Only the request's own bin can still hold a fitting block.
  const auto [top, sub] = bin_of(size);
  for (Block* b = bins_[top][sub]; b; b = b->next_free) {
    if (b->size >= size) return b;
  }
  return nullptr;
}

void BlockAllocator::add_chunk(std::uintptr_t base, std::size_t size) {
  if (size == 0 || size % alignment_ != 0 || base % alignment_ != 0) {
    throw InvalidArgument("BlockAllocator: chunk at " + hex(base) + " of " + std::to_string(size) +
                          " bytes is not aligned to " + std::to_string(alignment_));
  }
  auto next = chunks_.lower_bound(base);
  const bool overlaps_next = next != chunks_.end() && next->first < base + size;
  const bool overlaps_prev =
      next != chunks_.begin() && std::prev(next)->first + std::prev(next)->second.size > base;
  if (overlaps_next || overlaps_prev) {
    throw InvalidArgument("BlockAllocator: chunk at " + hex(base) + " overlaps another chunk");
  }
  Block* block = new_block();
  block->address = base;
  block->size = size;
  block->chunk = base;
  chunks_.emplace(base, ChunkInfo{size, block});
  insert_free(block);
  reserved_ += size;
}

void BlockAllocator::set_quick_cache(bool on) {
  if (!on) flush_quick();
  quick_on_ = on;
}

void BlockAllocator::flush_quick() {
  for (int i = 0; i < quick_count_; ++i) release(quick_[i]);
  quick_count_ = 0;
}

std::uintptr_t BlockAllocator::allocate(std::size_t bytes) {
  const std::size_t size = round_up(bytes);
  if (size < bytes) return 0;                    // overflow
  for (int i = quick_count_ - 1; i >= 0; --i) {  // newest first
    Block* parked = quick_[i];
    if (parked->size != size) continue;
    for (int j = i; j + 1 < quick_count_; ++j) quick_[j] = quick_[j + 1];
    --quick_count_;
    parked->state = State::kUsed;  // still in used_: parking kept its address entry
    in_use_ += size;
    if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
    ++live_;
    ++total_;
    return parked->address;
  }
  Block* block = find_fit(size);
  if (!block && quick_count_ > 0) {
    flush_quick();  // parked blocks merged back may make room
    block = find_fit(size);
  }
  if (!block) return 0;
  remove_free(block);
  if (block->size > size) {
    // The remainder stays free. It cannot merge with its right neighbour: that
    // one was adjacent to a free block and would have been merged already.
    Block* rest = new_block();
    rest->address = block->address + size;
    rest->size = block->size - size;
    rest->chunk = block->chunk;
    rest->prev_phys = block;
    rest->next_phys = block->next_phys;
    if (rest->next_phys) rest->next_phys->prev_phys = rest;
    block->next_phys = rest;
    block->size = size;
    insert_free(rest);
  }
  block->state = State::kUsed;
  used_.insert(block->address, block);
  in_use_ += size;
  if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
  ++live_;
  ++total_;
  return block->address;
}

BlockAllocator::Block* BlockAllocator::live_block(std::uintptr_t address, const char* operation) {
  Block* block = used_.find(address);
  if (!block || block->state != State::kUsed) {
    throw InvalidArgument(std::string("memory pool: ") + operation + " of " + hex(address) +
                          ", which is not a live allocation of this pool (double free or "
                          "foreign pointer)");
  }
  return block;
}

void BlockAllocator::release(Block* block) {
  used_.erase(block->address);
  Block* next = block->next_phys;
  if (next && next->state == State::kFree) {
    remove_free(next);
    block->size += next->size;
    block->next_phys = next->next_phys;
    if (block->next_phys) block->next_phys->prev_phys = block;
    drop_block(next);
  }
  Block* prev = block->prev_phys;
  if (prev && prev->state == State::kFree) {
    remove_free(prev);
    prev->size += block->size;
    prev->next_phys = block->next_phys;
    if (prev->next_phys) prev->next_phys->prev_phys = prev;
    drop_block(block);
    block = prev;
  }
  insert_free(block);
}

std::size_t BlockAllocator::free(std::uintptr_t address) {
  Block* block = live_block(address, "free");
  const std::size_t size = block->size;
  in_use_ -= size;
  --live_;
  if (quick_on_ && size <= kQuickMaxSize) {
    if (quick_count_ == kQuickSlots) {  // the oldest goes back to the bins
      release(quick_[0]);
      for (int j = 0; j + 1 < quick_count_; ++j) quick_[j] = quick_[j + 1];
      --quick_count_;
    }
    block->state = State::kParked;  // neighbours do not merge with it
    quick_[quick_count_++] = block;
    return size;
  }
  release(block);
  return size;
}

std::size_t BlockAllocator::free_after(std::uintptr_t address, std::uint64_t fence) {
  Block* block = live_block(address, "free");
  const std::size_t size = block->size;
  block->state = State::kPending;
  in_use_ -= size;
  --live_;
  pending_bytes_ += size;
  pending_.emplace_back(block, fence);
  return size;
}

std::size_t BlockAllocator::reclaim(const std::function<bool(std::uint64_t)>& passed,
                                    const std::function<void(std::uint64_t)>& released) {
  std::size_t freed = 0;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const auto [block, fence] = pending_[i];
    if (!passed(fence)) {
      pending_[kept++] = pending_[i];
      continue;
    }
    pending_bytes_ -= block->size;
    release(block);
    if (released) released(fence);
    ++freed;
  }
  pending_.resize(kept);
  return freed;
}

std::vector<BlockAllocator::Chunk> BlockAllocator::take_free_chunks() {
  flush_quick();
  std::vector<Chunk> taken;
  for (auto chunk = chunks_.begin(); chunk != chunks_.end();) {
    Block* block = chunk->second.first;
    if (block->state == State::kFree && !block->next_phys) {
      remove_free(block);
      reserved_ -= block->size;
      taken.push_back({block->address, block->size});
      drop_block(block);
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
  for (const auto& [base, info] : chunks_) all.push_back({base, info.size});
  return all;
}

std::uint64_t BlockAllocator::largest_free_block() const noexcept {
  if (!top_bitmap_) return 0;
  const int top = 63 - std::countl_zero(top_bitmap_);
  const int sub = 31 - std::countl_zero(sub_bitmap_[top]);
  std::uint64_t largest = 0;
  for (const Block* b = bins_[top][sub]; b; b = b->next_free) {
    if (b->size > largest) largest = b->size;
  }
  return largest;
}

std::size_t BlockAllocator::block_size(std::uintptr_t address) const {
  const Block* block = used_.find(address);
  return block && block->state == State::kUsed ? block->size : 0;
}

}  // namespace stoke::detail
