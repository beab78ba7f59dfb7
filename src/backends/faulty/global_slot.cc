#include "backends/faulty/global_slot.h"

#include <algorithm>
#include <cstring>

namespace bulkhead::faulty {

size_t SessionWeights::upload(const void* owner, const std::vector<Tensor>& weights) {
  std::lock_guard lock(mu_);
  auto it = first_.find(owner);
  if (it != first_.end()) return it->second;
  size_t first = uploaded_.size();
  for (const Tensor& w : weights) uploaded_.push_back(w.clone_host());
  first_[owner] = first;
  return first;
}

void SessionWeights::read(size_t index, void* dst, size_t n) const {
  if (n == 0) return;
  Tensor w;
  {
    std::lock_guard lock(mu_);
    if (index < uploaded_.size()) w = uploaded_[index];  // immutable once uploaded
  }
  size_t have = w.defined() ? std::min(n, w.nbytes()) : 0;
  if (have) std::memcpy(dst, w.raw(), have);
  if (have < n) std::memset(static_cast<unsigned char*>(dst) + have, 0, n - have);
}

void GlobalSlot::set(const std::shared_ptr<SessionWeights>& session) {
  std::lock_guard lock(mu_);
  current_ = session;
}

std::shared_ptr<SessionWeights> GlobalSlot::current() const {
  std::lock_guard lock(mu_);
  return current_.lock();
}

}  // namespace bulkhead::faulty
