// Memory ownership (invariant I1): every Buffer records the Domain it lives in and the
// Allocator that made it. Nothing anywhere asks "which backend is current".
//
// Thread-safety: Domain is a value type. Allocator implementations are thread-safe.
// A Buffer is immutable after creation except for the bytes it holds; sharing a Buffer
// between threads is safe, writing its bytes concurrently is the writer's problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bulkhead/status.h"

namespace bulkhead {

enum class MemoryKind {
  kHost,         // ordinary process memory, readable by the CPU
  kDeviceLocal,  // device memory the CPU cannot read directly
  kHostVisible,  // device memory mapped into the process
};

const char* memory_kind_name(MemoryKind kind);

// Where a buffer lives. `id` is unique in the process for the lifetime of the program;
// it is what the copy router keys on. The host domain has id 0 and is shared by every
// allocator that hands out plain process memory.
struct Domain {
  uint64_t id = 0;
  std::string backend = "host";  // backend name, for messages
  int device = -1;               // device ordinal within the backend, -1 for host
  MemoryKind kind = MemoryKind::kHost;

  static Domain host() { return Domain{}; }
  // A new domain id that no other domain in this process has or will have.
  static uint64_t new_id();
  bool is_host() const { return id == 0; }
  bool operator==(const Domain& o) const { return id == o.id; }
  bool operator!=(const Domain& o) const { return id != o.id; }
  std::string to_string() const;  // "vulkan:0/device-local#7"
  std::string device_name() const;  // the device as options name it: "vulkan:0"; "host"
};

class Allocator;

// A block of memory in one domain. Owned by shared_ptr; the memory goes back to its
// allocator when the last reference goes. The Buffer keeps its allocator alive.
class Buffer {
 public:
  Buffer(std::shared_ptr<Allocator> allocator, Domain domain, void* data, size_t size, void* handle = nullptr)
      : allocator_(std::move(allocator)), domain_(std::move(domain)), data_(data), size_(size), handle_(handle) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const Domain& domain() const { return domain_; }
  // The allocator that made this buffer (nullptr for memory the user lent).
  const Allocator* allocator() const { return allocator_.get(); }
  // CPU-addressable pointer for host and host-visible memory; nullptr otherwise.
  void* data() const { return data_; }
  size_t size() const { return size_; }
  // Backend-specific handle (e.g. a VkBuffer) for device memory.
  void* handle() const { return handle_; }

 private:
  std::shared_ptr<Allocator> allocator_;
  Domain domain_;
  void* data_;
  size_t size_;
  void* handle_;
};

// Hands out buffers of one domain. Always held by shared_ptr (buffers keep it alive).
// What an allocator holds, in bytes.
struct AllocatorStats {
  size_t in_use = 0;  // in live buffers now
  size_t peak = 0;    // most in live buffers at once
  size_t cached = 0;  // held for reuse (not in a live buffer)
  // Of in_use + cached: the arena in which a run's intermediates are placed by lifetime
  // (0 where the allocator plans none, and while an idle session has given its pages back).
  size_t arena = 0;
  size_t arena_blocks = 0;  // the allocations of one run placed in it
  // Bytes of cache given back to the system so far, each time the last of several
  // overlapping runs ended (what a burst cached beyond the steady state), and the arena
  // and cache each time the session was idle for SessionOptions::release_idle_after_ms.
  size_t trimmed = 0;
};

class RunAllocator;

class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  virtual ~Allocator() = default;
  // Counters of this allocator (all zero for one that does not keep them).
  virtual AllocatorStats stats() const { return {}; }
  // An allocator for the tensors of one top-level run, or nullptr to allocate them from
  // this one. Runs of a session may overlap: each gets its own, or nullptr.
  virtual std::shared_ptr<RunAllocator> open_run() { return nullptr; }
  virtual const Domain& domain() const = 0;
  virtual std::string name() const = 0;
  // A buffer of at least `size` bytes aligned to `alignment`.
  virtual Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) = 0;
  // Called by ~Buffer. Implementations must accept calls from any thread.
  virtual void release(void* data, void* handle, size_t size) = 0;
};

// The allocations of one top-level run (Allocator::open_run). Its buffers may outlive
// the run (the run's outputs) and keep it alive.
class RunAllocator : public Allocator {
 public:
  // The run is over: every intermediate it allocated has been released; what is still
  // alive is an output. `ok` is false when the run failed part-way.
  virtual void finish(bool ok) = 0;
};

// Plain aligned process memory in the host domain. Stateless apart from counters.
class HostAllocator final : public Allocator {
 public:
  explicit HostAllocator(std::string name = "host") : name_(std::move(name)) {}
  static std::shared_ptr<HostAllocator> create(std::string name = "host") {
    return std::make_shared<HostAllocator>(std::move(name));
  }
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return name_; }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;
  // Bytes currently allocated and the peak, for reports and leak tests.
  size_t bytes_in_use() const;
  size_t peak_bytes() const;
  AllocatorStats stats() const override { return {bytes_in_use(), peak_bytes(), 0}; }

 private:
  Domain domain_ = Domain::host();
  std::string name_;
  struct Counters;
  std::shared_ptr<Counters> counters_ = make_counters();
  static std::shared_ptr<Counters> make_counters();
};

}  // namespace bulkhead
