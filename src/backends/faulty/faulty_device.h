// FaultyDevice: one fault of the `faulty` backend (faulty:<ordinal> or faulty:<name>).
// It runs the CPU backend's kernels (wrapped, faulty_kernel.h) in its own host-visible
// memory domain, registers host<->faulty and faulty<->faulty copies with the router while
// it lives, and keeps the fault's device-wide state (fault_state.h).
//
// Ownership: held by the sessions that use it and by their allocators (I4); it holds the
// CPU device whose kernels it wraps. Thread-safety: every method may be called from any
// thread.
#pragma once

#include <atomic>
#include <memory>

#include "backend/backend.h"
#include "backends/faulty/fault_state.h"

namespace bulkhead::faulty {

class FaultyDevice final : public Device, public std::enable_shared_from_this<FaultyDevice> {
 public:
  FaultyDevice(Fault fault, DeviceInfo info, int dropped_dispatch, std::shared_ptr<Device> cpu,
               std::shared_ptr<CopyRouter> router);
  ~FaultyDevice() override;

  const DeviceInfo& info() const override { return info_; }
  const Domain& compute_domain() const override { return domain_; }
  // Each session's allocator carries that session's state on the device; under
  // global-slot, creating it also makes the session the device's "current" one.
  std::shared_ptr<Allocator> create_session_allocator(const std::string& owner) override;
  const KernelTable& kernels() const override { return kernels_; }
  std::shared_ptr<void> enter_run(int threads) const override { return cpu_->enter_run(threads); }
  std::shared_ptr<void> begin_run(const RunStart& run) override;

 private:
  DeviceInfo info_;
  Domain domain_;
  std::shared_ptr<Device> cpu_;
  std::shared_ptr<CopyRouter> router_;
  KernelTable kernels_;
  std::shared_ptr<DeviceFaults> faults_ = std::make_shared<DeviceFaults>();
  std::atomic<uint64_t> sessions_{0};
};

}  // namespace bulkhead::faulty
