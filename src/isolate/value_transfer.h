// Values across the process boundary with one copy each way (I8). The sender packs
// every tensor of a message into one shared-memory region — the single copy of its
// bytes — and seals it; the receiver maps the region and wraps it as Tensors without
// copying: each Tensor is a view at an offset of the mapping, which stays mapped while
// any of them lives. String tensors are not flat bytes: they are serialised into the
// region and rebuilt on the other side. Sequences and optionals travel as lists of
// tensors with their kind.
//
// Free functions; thread-safe (no shared state).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "bulkhead/bulkhead.hpp"
#include "isolate/shared_memory.h"
#include "isolate/unique_fd.h"

namespace bulkhead::isolate {

struct PackedValues {
  std::string descriptors;    // names, kinds, types, shapes, offsets (protocol payload)
  uint64_t region_bytes = 0;  // 0 when no tensor has bytes (then `region` is invalid)
  UniqueFd region;            // sealed memfd holding the bytes
};

// A region the sender keeps and rewrites message after message, so steady-state runs
// copy into pages that already exist instead of fresh ones. It is not sealed: only for
// a receiver that trusts the sender to write it only while the receiver is not reading
// (the supervisor's inputs: it writes them only between runs), and that maps it
// read-only (SharedMemory::map_readonly).
struct ReusableRegion {
  UniqueFd fd;
  uint64_t capacity = 0;
  uint64_t id = 0;  // changes whenever the region is replaced by a larger or smaller one
};

// Copies a tensor whose bytes the CPU cannot read into `dst` (host memory); used by the
// worker for outputs left in device memory. May be empty: such tensors are then an error.
using DeviceCopy = std::function<Status(const Tensor& src, const Tensor& dst)>;

// Packs `values`; `what` ("input", "output") names them in errors. With `reuse`, the
// bytes go into that region (replaced when too small or far too large) and the result's
// `region` is left empty; without it, into a fresh sealed region.
Result<PackedValues> pack_values(const NamedValues& values, SharedMemory& shm, const char* what,
                                 const DeviceCopy& copy = {}, ReusableRegion* reuse = nullptr);
// Rebuilds values from descriptors over `region` (null when region_bytes is 0), with no
// copy of tensor bytes. Every offset, size, type and shape is checked against the region.
Result<NamedValues> unpack_values(const std::string& descriptors, const std::shared_ptr<Buffer>& region,
                                  uint64_t region_bytes, const char* what);

}  // namespace bulkhead::isolate
