// SharedMemory: memfd regions that carry tensors between a session's caller and its
// worker process (I8). Two kinds:
//
//  - Sealed one-shot regions (the model's bytes): written with write(), sealed (no more
//    writes, no growing, no shrinking), handed over as a file descriptor and mapped by
//    the other side copy-on-write with map(); nothing the sender does later can change
//    or truncate them.
//  - Reused regions (runs' inputs and outputs): made with allocate() — mapped writable
//    and populated on the writer's side — and mapped once on the reader's side with
//    map_readonly() or map_shared(), then rewritten run after run. Both sides keep their
//    mappings, so a run's hand-off is one memcpy into pages that are already mapped: a
//    fresh region per run costs a page fault per 4 KiB on both sides instead, which
//    measured 3 GB/s against 20 GB/s for the memcpy. The protocol decides when a reused
//    region may be rewritten (value_transfer.h, output_regions.h).
//
// Ownership: a Buffer made here owns its mapping (munmap when the last Tensor over it
// goes) and, for regions allocate()d here, the memfd. Buffers keep the SharedMemory
// object alive. The domain is the host domain: the bytes are ordinary process memory.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "bulkhead/memory.h"
#include "isolate/unique_fd.h"

namespace bulkhead::isolate {

class SharedMemory final : public Allocator {
 public:
  explicit SharedMemory(std::string name) : name_(std::move(name)) {}
  static std::shared_ptr<SharedMemory> create(std::string name) { return std::make_shared<SharedMemory>(std::move(name)); }

  const Domain& domain() const override { return domain_; }
  std::string name() const override { return name_; }
  // A new region of `size` bytes, mapped shared and writable, its pages populated. The
  // Buffer owns the memfd (fd_of() lends it, to hand over).
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;

  // A new, unmapped region of `size` bytes (zero-filled until written).
  static Result<UniqueFd> create_region(size_t size);
  // Copies `n` bytes into the region at `offset`.
  static Status write(int region, size_t offset, const void* data, size_t n);
  // Seals a region against writes, growth and shrinking (it must not be mapped writable).
  static Status seal(int region);
  // The memfd of a region from allocate(), still owned by the Buffer; -1 for any other buffer.
  static int fd_of(const Buffer& region);
  // A new descriptor of the same region that allows reading only: what it is mapped
  // through cannot be written (for a region lent to another worker, lending.h).
  static Result<UniqueFd> reopen_readonly(int region);

  // Maps a sealed region received from the other side, copy-on-write (the caller may
  // write to its Tensors; the sender never sees it), with its pages mapped in at once.
  // Fails, naming `what`, when the region is smaller than `size` or not sealed. The
  // descriptor is closed once mapped.
  Result<std::shared_ptr<Buffer>> map(UniqueFd fd, size_t size, const std::string& what);
  // Maps a region the peer keeps and rewrites between messages (the supervisor's input
  // region), shared and read-only: its pages stay mapped across runs, and a write
  // through the mapping faults instead of silently diverging from the region.
  Result<std::shared_ptr<Buffer>> map_readonly(UniqueFd fd, size_t size, const std::string& what);
  // Maps a region the peer keeps and rewrites between messages (a worker's output
  // region), shared and writable, its pages mapped in at once. The caller may write to
  // its Tensors; the peer never reads them. The descriptor is closed once mapped.
  Result<std::shared_ptr<Buffer>> map_shared(UniqueFd fd, size_t size, const std::string& what);

 private:
  // A MAP_SHARED mapping with `prot` of a region the peer keeps; closes `fd`.
  Result<std::shared_ptr<Buffer>> map_kept(UniqueFd fd, size_t size, const std::string& what, int prot);

  Domain domain_ = Domain::host();
  std::string name_;
};

}  // namespace bulkhead::isolate
