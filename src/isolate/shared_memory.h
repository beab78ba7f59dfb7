// SharedMemory: memfd regions that carry tensors between a session's caller and its
// worker process (I8). A region is written by one side, sealed (no more writes, no
// growing, no shrinking), handed over as a file descriptor and mapped by the other side
// copy-on-write, so each side's Tensors are views of the mapping — no copy on receipt —
// and nothing the sender does later can change or truncate what the receiver holds.
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
  // A new memfd region of `size` bytes (at least one page), mapped shared and writable.
  // The Buffer owns the memfd; seal() turns it into a descriptor to hand over.
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;

  // Unmaps `region` (which must come from allocate() and be held by nobody else),
  // seals it against writes, growth and shrinking, and returns its descriptor.
  static Result<UniqueFd> seal(std::shared_ptr<Buffer> region);
  // Maps a sealed region received from the other side, copy-on-write (the caller may
  // write to its Tensors; the sender never sees it). Fails, naming `what`, when the
  // region is smaller than `size` or not sealed. The descriptor is closed once mapped.
  Result<std::shared_ptr<Buffer>> map(UniqueFd fd, size_t size, const std::string& what);

 private:
  Domain domain_ = Domain::host();
  std::string name_;
};

}  // namespace bulkhead::isolate
