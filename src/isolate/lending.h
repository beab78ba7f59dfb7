// Lending: a region of shared memory that a caller's tensors already live in, mapped by a
// process-isolated session's worker read-only and read where it is, instead of being
// copied into the worker's input region (I8). This is how a pipeline F -> G of two
// isolated sessions hands F's outputs to G without a copy (RunOptions::outputs_for).
//
// Two kinds of region are lent: a pipeline's outputs (output_regions.h), and tensors a
// caller allocates for a session's inputs and fills itself (Session::allocate_input,
// InputRegions below), as Triton's shared-memory inputs.
//
// A region is made for one receiving session and lent to no other: the receiver's
// worker keeps it mapped across runs (a mapping made per run costs a page fault per
// 4 KiB, slower than the copy it saves), so it could read whatever is written there
// later. Only data that the caller has said is for that session is ever written there
// (output_regions.h offers such regions only to runs whose outputs are for it). The
// worker gets a read-only descriptor: it cannot write what the caller holds.
//
// What lending gives up: a copy into the receiver's input region is taken before its run
// and only the supervisor writes there, so nothing another worker does can change a run's
// inputs while it runs. A pipeline's region stays mapped writable in the worker that
// writes it (output_regions.h: it writes a region only in a run offered it), so a fault
// in that process writing stray memory during the receiver's run could reach them. That
// is why a pipeline's hand-off is lent only when the caller asks (RunOptions::outputs_for);
// caller-written inputs (InputRegions) give nothing up: only the caller writes them.
//
// Thread-safety: lendable() may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bulkhead/memory.h"
#include "isolate/shared_memory.h"
#include "isolate/unique_fd.h"

namespace bulkhead::isolate {

struct LendableRegion {
  uint64_t uid = 0;            // names the region for good (next_lend_id()): never reused
  int fd = -1;                 // read-only descriptor, borrowed: valid while the Buffer lives
  const char* base = nullptr;  // this process's mapping
  uint64_t size = 0;
};

// An allocator whose buffers may be lendable regions.
class LendingAllocator : public Allocator {
 public:
  // The region `buffer` (one of this allocator's) lies in, when it may be lent to the
  // session whose lend id is `receiver`; nullopt otherwise (the bytes are then copied).
  virtual std::optional<LendableRegion> lendable(const Buffer& buffer, uint64_t receiver) const = 0;
};

// Ids of receiving sessions and of lent regions: unique in the process, never reused.
uint64_t next_lend_id();

// Buffers for one receiving session's inputs, each in a shared-memory region of its own
// (Session::allocate_input): lendable to that session only, for as long as the buffer
// lives. Ownership: buffers keep the allocator alive; it owns each region's mapping and
// read-only descriptor until the buffer goes. Thread-safety: every method may be called
// from any thread.
class InputRegions final : public LendingAllocator {
 public:
  InputRegions(std::shared_ptr<SharedMemory> shm, uint64_t receiver) : shm_(std::move(shm)), receiver_(receiver) {}

  const Domain& domain() const override { return shm_->domain(); }
  std::string name() const override { return "isolation inputs"; }
  // A region of its own, mapped writable here, its pages populated.
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;
  std::optional<LendableRegion> lendable(const Buffer& buffer, uint64_t receiver) const override;

 private:
  struct Region {
    std::shared_ptr<Buffer> mapping;  // from shm_->allocate: owns the memfd
    UniqueFd readonly;
    uint64_t uid = 0;
    uint64_t bytes = 0;  // the region's size as the receiver's worker maps it
  };
  std::shared_ptr<SharedMemory> shm_;
  const uint64_t receiver_;
  mutable std::mutex mu_;
  std::map<uint64_t, Region> regions_;  // by uid (a buffer's handle)
};

}  // namespace bulkhead::isolate
