// CopyRouter (invariant I2): copies are routed by the domains of their two ends, through
// a table that devices fill when they are opened and empty when they are torn down.
// Host → host copies need no entry. A pair of devices with no entry of its own (two
// backends' devices) is staged through host memory when each end has its transfer to or
// from the host; any other pair is rejected with an error naming both domains — a buffer
// is never handed to a backend that cannot read it.
//
// Thread-safe: lookups take a shared lock, registration an exclusive one. The copy
// function runs outside the lock.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <utility>

#include "bulkhead/tensor.h"

namespace bulkhead {

class CopyRouter {
 public:
  // Copies src's bytes into dst (same dtype and element count, already allocated).
  using CopyFn = std::function<Status(const Tensor& src, const Tensor& dst)>;

  // Registers the transfer for (src, dst). `owner` names who registered it (for
  // messages and for remove_owner). Replaces an existing entry for the same pair.
  void add(const Domain& src, const Domain& dst, CopyFn fn, const std::string& owner);
  // Removes every entry that involves domain `id` (called when a device is torn down).
  void remove_domain(uint64_t id);
  size_t size() const;
  bool can_copy(const Domain& src, const Domain& dst) const;
  // Copies `src` into `dst`, routed by the domains of the two buffers.
  Status copy(const Tensor& src, const Tensor& dst) const;
  // Name of the transfer that would serve (src, dst): "host", the owner, or "".
  std::string route_name(const Domain& src, const Domain& dst) const;

 private:
  struct Entry {
    CopyFn fn;
    std::string owner;
  };
  mutable std::shared_mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Entry> table_;
};

}  // namespace bulkhead
