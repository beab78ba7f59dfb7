// Values across the process boundary with at most one copy each way (I8). The sender
// packs every tensor of a message into one shared-memory region — the single copy of its
// bytes, or none for the outputs a worker's run wrote there itself (InPlace) — and the receiver wraps its mapping of the region as Tensors without copying: each Tensor is a view at an offset of the mapping, which stays mapped while
// any of them lives. String tensors are not flat bytes: they are serialised into the
// region and rebuilt on the other side. Sequences and optionals travel as lists of
// tensors with their kind.
//
// Free functions; thread-safe (no shared state).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "isolate/shared_memory.h"
#include "isolate/unique_fd.h"

namespace bulkhead::isolate {

struct PackedValues {
  std::string descriptors;         // names, kinds, types, shapes, offsets (protocol payload)
  uint64_t region_bytes = 0;       // 0 when no tensor has bytes (then `region` is null)
  std::shared_ptr<Buffer> region;  // the mapping the bytes were written into
  uint64_t copied_bytes = 0;       // of region_bytes, those copied (the rest were in place)
};

// Bytes already in a region: a worker's outputs its run wrote into the output region
// (SurvivorRegion). pack_values describes a tensor whose bytes lie in [base, base + used)
// where it is instead of copying it, when the region `into` returns is that one and the
// tensor overlaps no other tensor so described (the receiver's tensors never share bytes).
struct InPlace {
  const char* base = nullptr;
  uint64_t used = 0;
};

// Regions the receiver has mapped already, which the sender's tensors may view (another
// session's outputs lent to the receiver, lending.h). pack_values describes a tensor
// whose bytes lie wholly in one of them, at a 64-byte aligned offset, where it is — the
// descriptor names the region by its index here plus one — instead of copying it. The
// receiver passes its mappings of the same regions, in the same order, to unpack_values.
struct LentSpan {
  const char* base = nullptr;
  uint64_t size = 0;
};

// Supplies pack_values with a writable mapping of at least `bytes` bytes (> 0).
using RegionSource = std::function<Result<std::shared_ptr<Buffer>>(uint64_t bytes)>;

// A region the sender keeps and rewrites message after message, so steady-state runs
// copy into pages that are already mapped instead of fresh ones: the supervisor's input
// region. Only for a receiver that trusts the sender to write it only while the
// receiver is not reading (the supervisor writes inputs only between runs) and that
// maps it read-only (SharedMemory::map_readonly).
struct ReusableRegion {
  std::shared_ptr<Buffer> mapping;  // from SharedMemory::allocate (owns the memfd)
  uint64_t id = 0;                  // changes whenever the region is replaced
  // The region for `bytes` bytes: this one, unless it is too small or, past 1 MiB, more
  // than four times larger than needed (a huge message once should not pin that much
  // shared memory for the session's life); then a new one with a new id.
  Result<std::shared_ptr<Buffer>> get(SharedMemory& shm, uint64_t bytes);
};

// The tensors a value holds: the tensor, or a sequence's; none for an empty optional.
std::vector<const Tensor*> tensors_of(const Value& v);

// Copies a tensor whose bytes the CPU cannot read into `dst` (host memory); used by the
// worker for outputs left in device memory. May be empty: such tensors are then an error.
using DeviceCopy = std::function<Status(const Tensor& src, const Tensor& dst)>;

// Packs `values` into one region from `into` (asked once, only when some tensor has
// bytes); `what` ("input", "output") names them in errors.
// `copied_bytes` counts neither tensors in place nor those in `lent` regions.
Result<PackedValues> pack_values(const NamedValues& values, const RegionSource& into, const char* what,
                                 const DeviceCopy& copy = {}, const InPlace& in_place = {},
                                 const std::vector<LentSpan>& lent = {});
// Rebuilds values from descriptors over `region` (null when region_bytes is 0) and the
// `lent` regions (the receiver's mappings of pack_values' LentSpans, in their order), with
// no copy of tensor bytes. Every region index, offset, size, type and shape is checked
// against the region it names.
Result<NamedValues> unpack_values(const std::string& descriptors, const std::shared_ptr<Buffer>& region,
                                  uint64_t region_bytes, const char* what,
                                  const std::vector<std::shared_ptr<Buffer>>& lent = {});

}  // namespace bulkhead::isolate
