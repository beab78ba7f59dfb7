// FaultyAllocator: one session's memory on a faulty device — plain process memory in the
// device's own host-visible domain (so the CPU kernels can run on it) — and the session's
// state on the device (fault_state.h), which it owns. Buffers keep their allocator alive
// and the allocator keeps its device alive (I4). Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backends/faulty/fault_state.h"

namespace bulkhead::faulty {

class FaultyAllocator final : public Allocator {
 public:
  FaultyAllocator(std::shared_ptr<Device> device, Domain domain, std::string name, std::shared_ptr<SessionState> session)
      : device_(std::move(device)), domain_(std::move(domain)), name_(std::move(name)), session_(std::move(session)) {}
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return name_; }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;
  const std::shared_ptr<SessionState>& session() const { return session_; }

 private:
  std::shared_ptr<Device> device_;
  Domain domain_;
  std::string name_;
  std::shared_ptr<SessionState> session_;
};

}  // namespace bulkhead::faulty
