// Field report A's bug: the device keeps ONE weights scratch area, and each session lays
// its weights out in it at offsets counted from 0 — per session, so two sessions'
// uploads overlap and the later one overwrites the earlier one's weights.
//
// SharedScratch is the device-wide area (owned by the device, thread-safe); ScratchLayout
// is one session's placement of its weights in it (owned by the session's state,
// thread-safe). The bug is only in the offsets: every access is bounds-checked.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace bulkhead::faulty {

class SharedScratch {
 public:
  // Writes `n` bytes at `offset`, first growing the area (new bytes zero) to hold them.
  void write(size_t offset, const void* src, size_t n);
  // Reads `n` bytes at `offset`; bytes past the end of the area read as zero.
  void read(size_t offset, void* dst, size_t n) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<unsigned char> bytes_;  // zero-initialised when the device is created
};

class ScratchLayout {
 public:
  using Upload = std::function<void(const std::vector<size_t>& offsets)>;
  // Offsets of the weights of `owner` (one kernel; `sizes` in bytes). On the owner's
  // first call they are placed after this session's earlier ones — counting from 0 for
  // every session, the bug — and `upload` runs before any other call for this session
  // can read them.
  std::vector<size_t> place(const void* owner, const std::vector<size_t>& sizes, const Upload& upload);

 private:
  std::mutex mu_;
  std::unordered_map<const void*, std::vector<size_t>> placed_;
  size_t next_ = 0;
};

}  // namespace bulkhead::faulty
