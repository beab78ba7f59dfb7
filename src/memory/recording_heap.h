// RecordingHeap: the memory of a CPU run recorded without a plan (a session's first run).
//
// PlannedHostAllocator places a run's intermediates by a plan made from the record of an
// earlier run. The run that makes the record has no plan: each of its blocks is new. From
// malloc, its fresh 4 KiB pages fault in one by one, and in a virtual machine a fault costs
// about 2 us: ShuffleNet's first run touched 3100 pages, 6 of its 8 ms (the next runs take
// 2). Here the blocks are placed best-fit in one range of address space advised as 2 MiB
// pages; freed blocks coalesce with their free neighbours and are used again, so the run
// touches about its peak of live bytes, in 2 MiB faults.
//
// Only address space is reserved (MAP_NORESERVE): a page exists once touched. When the run
// is over its owner calls discard_free_pages(), which gives the free ranges' pages back
// (the run's outputs stay where they are, with the caller), and drops the heap with its
// last block, which unmaps the range.
//
// Not thread-safe: the owner (RunArena) calls it under its allocator's mutex.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

namespace bulkhead {

// Best-fit placement of blocks in a range of `capacity` bytes, by offset: a block goes
// into the smallest free range that holds it (the lowest such), else at the top; a freed
// block merges with its free neighbours, and the top comes down when the block at it goes.
// Offsets and sizes are multiples of whatever the caller uses (RecordingHeap: 64 bytes).
class BestFitRanges {
 public:
  explicit BestFitRanges(size_t capacity) : capacity_(capacity) {}
  // The offset of a block of `size` bytes (> 0), or nullopt when it does not fit.
  std::optional<size_t> take(size_t size);
  // Frees the block at `offset` of `size` bytes, as take() returned it.
  void give(size_t offset, size_t size);
  // Bytes below the highest block ever placed (what a run has touched).
  size_t high_water() const { return high_water_; }
  // The end of the highest block now placed: above it, nothing is in use.
  size_t top() const { return top_; }
  size_t live_blocks() const { return live_; }
  // The free ranges below top(), as (offset, size) in order of offset.
  const std::map<size_t, size_t>& free_ranges() const { return by_offset_; }

 private:
  void insert(size_t offset, size_t size);
  void erase(std::map<size_t, size_t>::iterator it);

  size_t capacity_;
  size_t top_ = 0, high_water_ = 0, live_ = 0;
  std::map<size_t, size_t> by_offset_;            // free ranges below top_: offset → size
  std::set<std::pair<size_t, size_t>> by_size_;  // the same ranges as (size, offset)
};

class RecordingHeap {
 public:
  // Address space reserved for one run: its blocks beyond this come from elsewhere.
  static constexpr size_t kReserve = size_t{16} << 30;
  // nullptr where there are no huge-page mappings (sanitizer builds, which keep malloc so
  // that ASan and TSan see every block) or the system refuses the reservation.
  static std::unique_ptr<RecordingHeap> make();
  ~RecordingHeap();
  RecordingHeap(const RecordingHeap&) = delete;
  RecordingHeap& operator=(const RecordingHeap&) = delete;

  // A block of `bytes` (a multiple of 64, > 0), or nullptr when the range is full.
  void* take(size_t bytes);
  // Frees a block from take(), of the same `bytes`.
  void give(void* p, size_t bytes);
  // Whether `p` is a block of this heap.
  bool holds(const void* p) const { return p >= base_ && p < base_ + size_; }
  size_t live_blocks() const { return ranges_.live_blocks(); }
  size_t high_water() const { return ranges_.high_water(); }
  // Gives back to the system the pages of every free range and those above the blocks in
  // use; the blocks in use keep theirs. Later take()s still work (their pages come back
  // zero-filled).
  void discard_free_pages();

 private:
  RecordingHeap(char* base, size_t size) : base_(base), size_(size), ranges_(size) {}
  char* base_;
  size_t size_;
  BestFitRanges ranges_;
};

}  // namespace bulkhead
