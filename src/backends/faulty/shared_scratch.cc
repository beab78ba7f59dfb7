#include "backends/faulty/shared_scratch.h"

#include <algorithm>
#include <cstring>

namespace bulkhead::faulty {

void SharedScratch::write(size_t offset, const void* src, size_t n) {
  if (n == 0) return;
  std::lock_guard lock(mu_);
  if (bytes_.size() < offset + n) bytes_.resize(offset + n, 0);
  std::memcpy(bytes_.data() + offset, src, n);
}

void SharedScratch::read(size_t offset, void* dst, size_t n) const {
  if (n == 0) return;
  std::lock_guard lock(mu_);
  size_t have = offset < bytes_.size() ? std::min(n, bytes_.size() - offset) : 0;
  if (have) std::memcpy(dst, bytes_.data() + offset, have);
  if (have < n) std::memset(static_cast<unsigned char*>(dst) + have, 0, n - have);
}

size_t SharedScratch::size() const {
  std::lock_guard lock(mu_);
  return bytes_.size();
}

std::vector<size_t> ScratchLayout::place(const void* owner, const std::vector<size_t>& sizes, const Upload& upload) {
  std::lock_guard lock(mu_);
  auto it = placed_.find(owner);
  if (it != placed_.end()) return it->second;
  std::vector<size_t> offsets;
  for (size_t n : sizes) {
    offsets.push_back(next_);
    next_ += (n + 63) / 64 * 64;
  }
  upload(offsets);
  placed_[owner] = offsets;
  return offsets;
}

}  // namespace bulkhead::faulty
