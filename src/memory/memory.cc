#include <atomic>
#include <cstdlib>
#include <new>

#include "bulkhead/memory.h"
#include "memory/host_pages.h"

namespace bulkhead {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kDeviceLocal: return "device-local";
    case MemoryKind::kHostVisible: return "host-visible";
  }
  return "?";
}

uint64_t Domain::new_id() {
  // Ids only ever grow, so a domain that has been torn down is never confused with a
  // later one at the same address. This counter is the one piece of process-wide state
  // in the memory layer; it hands out names, it selects nothing.
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string Domain::to_string() const {
  if (is_host()) return "host";
  return backend + ":" + std::to_string(device) + "/" + memory_kind_name(kind) + "#" + std::to_string(id);
}

std::string Domain::device_name() const {
  if (is_host()) return "host";
  return backend + ":" + std::to_string(device < 0 ? 0 : device);
}

Buffer::~Buffer() {
  if (allocator_) allocator_->release(data_, handle_, size_);
}

struct HostAllocator::Counters {
  std::atomic<size_t> in_use{0};
  std::atomic<size_t> peak{0};
};

std::shared_ptr<HostAllocator::Counters> HostAllocator::make_counters() { return std::make_shared<Counters>(); }

Result<std::shared_ptr<Buffer>> HostAllocator::allocate(size_t size, size_t alignment) {
  if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
  // Rounding up, and the huge-page mapping's extra page, must not wrap.
  if (size > (size_t{1} << 62))
    return Status(StatusCode::kResourceExhausted, "host allocation of " + std::to_string(size) + " bytes refused: more than any machine has");
  size_t rounded = (std::max<size_t>(size, 1) + alignment - 1) / alignment * alignment;
  bool mapped = false;
  void* p = host_fresh_alloc(rounded, alignment, &mapped);  // written in full next, as a rule
  if (!p) return Status(StatusCode::kResourceExhausted, "host allocation of " + std::to_string(size) + " bytes failed");
  size_t now = counters_->in_use.fetch_add(rounded) + rounded;
  size_t peak = counters_->peak.load();
  while (now > peak && !counters_->peak.compare_exchange_weak(peak, now)) {
  }
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, rounded, mapped ? host_pages_tag() : nullptr);
}

void HostAllocator::release(void* data, void* handle, size_t size) {
  if (handle == host_pages_tag()) host_pages_free(data, size);
  else std::free(data);
  counters_->in_use.fetch_sub(size);
}

size_t HostAllocator::bytes_in_use() const { return counters_->in_use.load(); }
size_t HostAllocator::peak_bytes() const { return counters_->peak.load(); }

}  // namespace bulkhead
