#include "memory/recording_heap.h"

#include <algorithm>

#include "memory/host_pages.h"

namespace bulkhead {

void BestFitRanges::insert(size_t offset, size_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void BestFitRanges::erase(std::map<size_t, size_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_offset_.erase(it);
}

std::optional<size_t> BestFitRanges::take(size_t size) {
  if (size == 0) return std::nullopt;
  auto fit = by_size_.lower_bound({size, 0});
  if (fit != by_size_.end()) {
    const auto [range_size, offset] = *fit;
    erase(by_offset_.find(offset));
    if (range_size > size) insert(offset + size, range_size - size);
    ++live_;
    return offset;
  }
  if (size > capacity_ - top_) return std::nullopt;
  const size_t offset = top_;
  top_ += size;
  high_water_ = std::max(high_water_, top_);
  ++live_;
  return offset;
}

void BestFitRanges::give(size_t offset, size_t size) {
  --live_;
  size_t begin = offset, end = offset + size;
  auto next = by_offset_.find(end);
  if (next != by_offset_.end()) {
    end += next->second;
    erase(next);
  }
  auto after = by_offset_.lower_bound(begin);
  if (after != by_offset_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      erase(prev);
    }
  }
  // Free ranges stay below the top: one that reaches it lowers the top instead.
  if (end == top_) top_ = begin;
  else insert(begin, end - begin);
}

std::unique_ptr<RecordingHeap> RecordingHeap::make() {
  // A process whose address space is limited (ulimit -v) may refuse the full reservation.
  for (size_t size = kReserve; size >= (size_t{1} << 30); size /= 4)
    if (void* p = host_pages_reserve(size)) return std::unique_ptr<RecordingHeap>(new RecordingHeap(static_cast<char*>(p), size));
  return nullptr;
}

RecordingHeap::~RecordingHeap() { host_pages_free(base_, size_); }

void* RecordingHeap::take(size_t bytes) {
  const std::optional<size_t> offset = ranges_.take(bytes);
  return offset ? base_ + *offset : nullptr;
}

void RecordingHeap::give(void* p, size_t bytes) { ranges_.give(static_cast<char*>(p) - base_, bytes); }

void RecordingHeap::discard_free_pages() {
  for (const auto& [offset, size] : ranges_.free_ranges()) host_pages_discard(base_ + offset, size);
  // Above the top: up to the end of the last 2 MiB page touched.
  const size_t touched = std::min(size_, (ranges_.high_water() + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  if (touched > ranges_.top()) host_pages_discard(base_ + ranges_.top(), touched - ranges_.top());
}

}  // namespace bulkhead
