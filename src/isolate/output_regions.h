// OutputRegions: the supervisor's side of the shared-memory regions a worker writes
// runs' outputs into (I8).
//
// A region is reused run after run, because a fresh region per run costs a page fault
// per 4 KiB on both sides (3 GB/s measured) where a memcpy into pages both sides keep
// mapped runs at 20 GB/s. Reuse must never change what a caller holds, so a region is
// offered to the worker for a run only when no output Tensor of an earlier run still
// views it:
//
//   offer()  before a run: the worker id of the smallest free region that should hold
//            the outputs (0: none), now reserved for this run;
//   take()   after the reply: the outputs' region — the offered one, or a new one the
//            worker made because nothing fitted — as a *lease*: a Buffer whose last
//            release puts the region back on the free list;
//   withdraw() when the run failed or the worker wrote elsewhere: the offer is free again.
//
// Free regions beyond two, or far larger than the last outputs, are unmapped and listed
// by forgotten() so the worker unmaps its side too. A fresh worker knows no regions:
// new_worker() unmaps the free ones, and leases still held by callers are unmapped when
// released instead of being reused (their contents stay valid until then).
//
// Regions for a receiver (lending.h): a run whose outputs the caller said are for
// another isolated session (RunOptions::outputs_for) is offered only regions made for
// that session, and a region made in such a run is for it for good; leases of these
// regions are lendable() to that session's worker, through a read-only descriptor kept
// here. Other runs are offered only regions for nobody.
//
// The worker keeps every region mapped writable. It writes one only during a run that
// was offered it, after every view of it was released; a worker that wrote elsewhere
// would be a bug the `check` command's re-hashing of earlier outputs reports.
//
// Ownership: leases keep the OutputRegions alive; it owns the mappings. Thread-safety:
// offer/take/withdraw/forgotten/new_worker are called under the RemoteSession's run
// lock; release() comes from any thread (the last Tensor of a run going away). An
// internal mutex covers both.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bulkhead/memory.h"
#include "isolate/lending.h"
#include "isolate/shared_memory.h"
#include "isolate/unique_fd.h"

namespace bulkhead::isolate {

class OutputRegions final : public LendingAllocator {
 public:
  explicit OutputRegions(std::shared_ptr<SharedMemory> shm) : shm_(std::move(shm)) {}
  static std::shared_ptr<OutputRegions> create(std::shared_ptr<SharedMemory> shm) {
    return std::make_shared<OutputRegions>(std::move(shm));
  }

  const Domain& domain() const override { return shm_->domain(); }
  std::string name() const override { return "isolation outputs"; }
  // Regions come only from runs (take()); this always fails.
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;
  // A lease's region, when it was made for `receiver` and can be lent.
  std::optional<LendableRegion> lendable(const Buffer& buffer, uint64_t receiver) const override;

  // The worker id of a free region of at least `expected_bytes` to offer, or 0. `receiver`:
  // the lend id of the session this run's outputs are for (0: none).
  uint64_t offer(uint64_t expected_bytes, uint64_t receiver = 0);
  // The region holding this run's `bytes` of outputs: `worker_id` with `fd` for a region
  // the worker just made (mapped here once), or the offered one with no fd. Errors when
  // the worker named a region it was not offered or sent one it had already sent.
  Result<std::shared_ptr<Buffer>> take(uint64_t worker_id, UniqueFd fd, uint64_t bytes, const std::string& what);
  // The offer of this run, if not taken, is free again.
  void withdraw();
  // Worker ids of regions unmapped here since the last call: the worker may unmap them.
  std::vector<uint64_t> forgotten();
  // A new worker process: regions of the old one are never offered again.
  void new_worker();

  // Regions mapped here now (free, offered and leased), and the free ones; for tests.
  size_t mapped() const;
  size_t free_regions() const;

 private:
  enum class State { kFree, kOffered, kLeased };
  struct Region {
    uint64_t worker_id = 0;
    uint64_t generation = 0;  // the worker that made it
    State state = State::kFree;
    std::shared_ptr<Buffer> mapping;
    uint64_t receiver = 0;  // the session it is for (lending.h); 0: nobody
    uint64_t uid = 0;       // its lend id, when it is for a receiver
    UniqueFd readonly;      // for the receiver's worker; invalid if it cannot be lent
    uint64_t lend_bytes = 0;  // the region's size as the receiver's worker maps it
  };
  static constexpr size_t kMaxFree = 2;

  // Unmaps free regions over kMaxFree (the smallest first) and, when `expected` > 0,
  // those far larger than `expected`. Requires mu_.
  void trim(uint64_t expected);
  void forget(std::map<uint64_t, Region>::iterator it);  // requires mu_

  std::shared_ptr<SharedMemory> shm_;
  mutable std::mutex mu_;
  std::map<uint64_t, Region> regions_;  // by a key of our own (a lease's handle)
  uint64_t next_key_ = 1;
  uint64_t generation_ = 0;
  uint64_t offered_key_ = 0;  // 0: nothing offered to the run in flight
  uint64_t run_receiver_ = 0;  // offer()'s receiver, for a region the run makes
  std::vector<uint64_t> forgotten_;
};

}  // namespace bulkhead::isolate
