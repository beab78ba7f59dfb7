#include "memory/caching_allocator.h"

#include <algorithm>
#include <bit>

#include "memory/host_pages.h"

namespace bulkhead {

namespace {
constexpr size_t kAlign = kBlockAlign;
}  // namespace

size_t CachingHostAllocator::size_class(size_t size) {
  if (size <= 4096) return (std::max<size_t>(size, 1) + kAlign - 1) / kAlign * kAlign;
  // Eight classes per power of two.
  size_t top = std::bit_floor(size);
  size_t step = top / 8;
  return (size + step - 1) / step * step;
}

CachingHostAllocator::~CachingHostAllocator() {
  for (auto& [sz, blocks] : free_)
    for (void* p : blocks) host_block_free(p, sz);
}

Result<void*> CachingHostAllocator::take(size_t size, size_t alignment, size_t* cls_out) {
  if (alignment > kAlign) return invalid_argument(name_ + ": alignment above 64 bytes is not supported");
  if (size > (size_t{1} << 62))  // size_class() must not wrap
    return Status(StatusCode::kResourceExhausted, name_ + ": allocation of " + std::to_string(size) + " bytes refused: more than any machine has");
  size_t cls = size_class(size);
  void* p = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
    }
    in_use_ += cls;
    peak_ = std::max(peak_, in_use_);
  }
  if (!p) {
    p = host_block_alloc(cls);
    if (!p) {
      std::lock_guard lock(mu_);
      in_use_ -= cls;
      return Status(StatusCode::kResourceExhausted, name_ + ": allocation of " + std::to_string(size) + " bytes failed");
    }
  }
  *cls_out = cls;
  return p;
}

Result<std::shared_ptr<Buffer>> CachingHostAllocator::allocate(size_t size, size_t alignment) {
  size_t cls = 0;
  BH_ASSIGN_OR_RETURN(void* p, take(size, alignment, &cls));
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, cls);
}

void CachingHostAllocator::release(void* data, void*, size_t size) { give(data, size); }

void CachingHostAllocator::give(void* data, size_t size, bool keep) {
  std::lock_guard lock(mu_);
  in_use_ -= size;
  if (!keep || cached_ + size > max_cached_) {
    host_block_free(data, size);
    return;
  }
  free_[size].push_back(data);
  cached_ += size;
}

void CachingHostAllocator::trim() {
  std::lock_guard lock(mu_);
  for (auto& [sz, blocks] : free_)
    for (void* p : blocks) host_block_free(p, sz);
  free_.clear();
  cached_ = 0;
}

size_t CachingHostAllocator::bytes_in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}
size_t CachingHostAllocator::bytes_cached() const {
  std::lock_guard lock(mu_);
  return cached_;
}
size_t CachingHostAllocator::peak_bytes() const {
  std::lock_guard lock(mu_);
  return peak_;
}

AllocatorStats CachingHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {in_use_, peak_, cached_};
}

}  // namespace bulkhead
