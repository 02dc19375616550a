#include "memory/small_blocks.hpp"

#include <algorithm>

namespace stoke::detail {

SmallBlocks::SmallBlocks(std::size_t region_bytes)
    : pages_(region_bytes / kPageBytes),
      page_class_(std::make_unique<std::atomic<std::uint8_t>[]>(pages_)),
      page_(pages_) {
  for (std::size_t i = 0; i < pages_; ++i) page_class_[i].store(0, std::memory_order_relaxed);
  empty_pages_.reserve(pages_);
  for (std::size_t i = pages_; i > 0; --i)
    empty_pages_.push_back(static_cast<std::uint32_t>(i - 1));
}

void SmallBlocks::attach(std::uintptr_t base) {
  base_.store(base, std::memory_order_release);
}

std::uintptr_t SmallBlocks::detach() {
  return base_.exchange(0, std::memory_order_acq_rel);
}

std::size_t SmallBlocks::take(int cls, std::uintptr_t* out, std::size_t n) {
  const std::size_t size = class_size(cls);
  const std::uintptr_t base = base_.load(std::memory_order_relaxed);
  std::size_t got = 0;
  while (got < n) {
    if (partial_[cls].empty()) {
      if (empty_pages_.empty()) break;
      const std::uint32_t fresh = empty_pages_.back();
      empty_pages_.pop_back();
      page_[fresh] = Page{cls, static_cast<std::uint32_t>(kPageBytes / size), 0, 0, 0, true};
      page_class_[fresh].store(static_cast<std::uint8_t>(cls), std::memory_order_release);
      partial_[cls].push_back(fresh);
    }
    const std::uint32_t index = partial_[cls].back();
    Page& page = page_[index];
    const std::uintptr_t page_base = base + index * kPageBytes;
    for (; got < n && page.free_head; ++got, ++page.out) {
      out[got] = page.free_head;
      page.free_head = load_word(page.free_head + sizeof(std::uintptr_t));
    }
    for (; got < n && page.bumped < page.capacity; ++got, ++page.out) {
      out[got] = page_base + page.bumped++ * size;
      mark_free(out[got]);
    }
    if (!page.free_head && page.bumped == page.capacity) {
      partial_[cls].pop_back();
      page.listed = false;
    }
  }
  out_bytes_ += got * size;
  out_count_ += got;
  return got;
}

void SmallBlocks::unlist(std::uint32_t index) {
  auto& list = partial_[page_[index].cls];
  list.erase(std::find(list.begin(), list.end(), index));
  page_[index].listed = false;
}

void SmallBlocks::give(std::uintptr_t address, int cls) {
  const std::uintptr_t base = base_.load(std::memory_order_relaxed);
  const auto index = static_cast<std::uint32_t>((address - base) / kPageBytes);
  Page& page = page_[index];
  mark_free(address);
  store_word(address + sizeof(std::uintptr_t), page.free_head);
  page.free_head = address;
  --page.out;
  out_bytes_ -= class_size(cls);
  --out_count_;
  if (page.out == 0) {  // the whole page is free: any class may have it
    if (page.listed) unlist(index);
    page = Page{};
    page_class_[index].store(0, std::memory_order_release);
    empty_pages_.push_back(index);
  } else if (!page.listed) {
    partial_[cls].push_back(index);
    page.listed = true;
  }
}

}  // namespace stoke::detail
