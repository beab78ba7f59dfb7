// Field report B's bug: the device has one "current session" slot that every newly
// created session overwrites, and kernels find their session's device state through it
// instead of through the session running them.
//
// SessionWeights is one session's device state — its uploaded weights, correctly per
// session (owned by the session's state, thread-safe). GlobalSlot is the device-wide slot
// (owned by the device, thread-safe); it holds the session weakly, so a destroyed
// session leaves an empty slot (reads give zeros), never a dangling one.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bulkhead/tensor.h"

namespace bulkhead::faulty {

class SessionWeights {
 public:
  // Index of the first of `owner`'s weights in this session's upload order; the owner's
  // first call uploads (copies) them.
  size_t upload(const void* owner, const std::vector<Tensor>& weights);
  // Copies weight `index` into `dst` (`n` bytes): as many bytes as that weight has, the
  // rest zero; all zero when there is no such weight.
  void read(size_t index, void* dst, size_t n) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, size_t> first_;
  std::vector<Tensor> uploaded_;  // host copies: they keep no allocator or device alive
};

class GlobalSlot {
 public:
  // A session was created on the device: it becomes the current one (the bug).
  void set(const std::shared_ptr<SessionWeights>& session);
  // The current session's weights, or nullptr when it is gone.
  std::shared_ptr<SessionWeights> current() const;

 private:
  mutable std::mutex mu_;
  std::weak_ptr<SessionWeights> current_;
};

}  // namespace bulkhead::faulty
