// CachingHostAllocator: a session's host memory. Freed blocks go to per-size free lists
// and are handed out again, so steady-state runs allocate no new pages (fresh pages from
// the OS cost a page fault per 4 KiB, which dominated element-wise kernels). Each session
// owns its own instance (I3): no block ever moves between sessions.
//
// Thread-safe. Cached memory is returned to the OS when the allocator is destroyed
// (after its last buffer) or when the cache passes `max_cached_bytes`.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "bulkhead/memory.h"

namespace bulkhead {

class CachingHostAllocator final : public Allocator {
 public:
  explicit CachingHostAllocator(std::string name, size_t max_cached_bytes = size_t{1} << 30)
      : name_(std::move(name)), max_cached_(max_cached_bytes) {}
  ~CachingHostAllocator() override;
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return name_; }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;

  // The block behind allocate(), for an allocator built on this cache: at least `size`
  // bytes, `*cls` of them (its size class), counted in use until give(p, *cls).
  Result<void*> take(size_t size, size_t alignment, size_t* cls);
  // Gives the block back: cached for the next take(), or freed when `keep` is false (or
  // the cache is full).
  void give(void* p, size_t cls, bool keep = true);
  // Frees every cached block.
  void trim();

  size_t bytes_in_use() const;
  size_t bytes_cached() const;
  size_t peak_bytes() const;
  AllocatorStats stats() const override;
  // Rounds a request up to its size class (at most 1/8 larger for big blocks).
  static size_t size_class(size_t size);

 private:
  Domain domain_ = Domain::host();
  std::string name_;
  size_t max_cached_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t in_use_ = 0, cached_ = 0, peak_ = 0;
};

}  // namespace bulkhead
