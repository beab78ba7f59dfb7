// One opened OpenCL device (BhpDevice): its context, its compiled programs (built once
// when it opens, immutable, shared by its sessions — I3), the transfer queue that
// write/read/copy use (serialised by a mutex), its buffers' accounting and its counters.
// Thread-safe. Destroyed after every session, kernel and buffer made from it is gone.
#pragma once

#include <CL/cl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.h"
#include "cl_util.h"
#include "programs.h"

namespace bulkhead::opencl {

class Device {
 public:
  static Result<std::unique_ptr<Device>> open(const Backend& backend, const DeviceEntry& entry);

  const Backend& backend() const { return backend_; }
  cl_context context() const { return context_.get(); }
  cl_device_id id() const { return entry_.id; }
  const std::string& name() const { return entry_.name; }
  // The program holding kernel `name`, or null.
  cl_program program_of(const std::string& name) const;
  // The operators create_kernel may accept.
  const std::vector<BhpOpInfo>& ops() const { return ops_; }
  // A new in-order queue on the device.
  Result<QueueHandle> make_queue() const;

  // Buffers: at least 4 bytes, so that a 0-byte buffer is still a distinct handle.
  Result<cl_mem> allocate(uint64_t bytes);
  void free(cl_mem mem);
  // The size of a buffer of this device.
  uint64_t size_of(cl_mem mem) const;

  // Transfers on the transfer queue, complete when they return.
  Status write(cl_mem dst, uint64_t offset, const void* src, uint64_t bytes);
  Status read(cl_mem src, uint64_t offset, void* dst, uint64_t bytes);
  Status copy(cl_mem src, uint64_t src_offset, cl_mem dst, uint64_t dst_offset, uint64_t bytes);

  void note_dispatch() { dispatches_.fetch_add(1, std::memory_order_relaxed); }
  void note_submit(bool run_work) {
    submits_.fetch_add(1, std::memory_order_relaxed);
    if (run_work) run_submits_.fetch_add(1, std::memory_order_relaxed);
  }
  void counters(BhpCounters* out) const;

 private:
  Device(const Backend& backend, const DeviceEntry& entry) : backend_(backend), entry_(entry) {}
  Status check_range(cl_mem mem, uint64_t offset, uint64_t bytes, const char* what) const;

  const Backend& backend_;
  const DeviceEntry& entry_;
  ContextHandle context_;
  Programs programs_;
  std::vector<BhpOpInfo> ops_;
  std::mutex transfer_mu_;
  QueueHandle transfer_;  // guarded by transfer_mu_
  uint64_t max_alloc_ = 0;
  std::atomic<uint64_t> submits_{0}, run_submits_{0}, dispatches_{0}, memory_{0};
};

}  // namespace bulkhead::opencl
