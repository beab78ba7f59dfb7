#include "isolate/lending.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace bulkhead::isolate {

uint64_t next_lend_id() {
  // Names from the memory layer's one process-wide counter (Domain::new_id): they only
  // ever grow, so a receiver or region that has gone is never confused with a later
  // one; they name, they select nothing.
  return Domain::new_id();
}

Result<std::shared_ptr<Buffer>> InputRegions::allocate(size_t size, size_t alignment) {
  // The region's pages are populated at once: a size beyond the machine's memory would
  // be met by the kernel's OOM killer rather than by an error.
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && size / static_cast<size_t>(page) >= static_cast<size_t>(pages))
    return Status(StatusCode::kResourceExhausted,
                  "a shared-memory input of " + std::to_string(size) + " bytes exceeds this machine's memory");
  BH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> mapping, shm_->allocate(std::max<size_t>(size, 1), alignment));
  BH_ASSIGN_OR_RETURN(UniqueFd readonly, SharedMemory::reopen_readonly(SharedMemory::fd_of(*mapping)));
  struct stat st {};
  if (fstat(readonly.get(), &st) != 0) return internal_error("cannot size a shared-memory region");
  const uint64_t uid = next_lend_id();
  auto buffer = std::make_shared<Buffer>(shared_from_this(), domain(), mapping->data(), size,
                                         reinterpret_cast<void*>(static_cast<uintptr_t>(uid)));
  std::lock_guard<std::mutex> l(mu_);
  regions_[uid] = Region{std::move(mapping), std::move(readonly), uid, static_cast<uint64_t>(st.st_size)};
  return buffer;
}

void InputRegions::release(void*, void* handle, size_t) {
  Region gone;  // unmapped and closed outside the lock
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
  if (it == regions_.end()) return;
  gone = std::move(it->second);
  regions_.erase(it);
}

std::optional<LendableRegion> InputRegions::lendable(const Buffer& buffer, uint64_t receiver) const {
  if (receiver != receiver_) return std::nullopt;
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buffer.handle())));
  if (it == regions_.end() || it->second.mapping->data() != buffer.data()) return std::nullopt;
  const Region& r = it->second;
  return LendableRegion{r.uid, r.readonly.get(), static_cast<const char*>(r.mapping->data()), r.bytes};
}

}  // namespace bulkhead::isolate
