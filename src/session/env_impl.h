// EnvImpl: what an Env handle shares — backends, the weak device cache, the router.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "bulkhead/bulkhead.hpp"
#include "memory/copy_router.h"

namespace bulkhead {

class EnvImpl {
 public:
  EnvImpl();
  // Opens (or finds open) the device named by `spec`: BACKEND, BACKEND:INDEX or
  // BACKEND:NAME ("cpu", "cpu:0", "vulkan:1", "faulty:shared-scratch").
  Result<std::shared_ptr<Device>> acquire_device(const std::string& spec);
  // A zeroed tensor in the compute memory of the device named by `spec`, from an
  // allocator of its own (the tensor keeps the device open): the far end of a
  // process-level copy for the C and Python APIs.
  Result<Tensor> allocate_zeroed(const std::string& spec, DataType dtype, const Shape& shape);
  Status register_backend(std::shared_ptr<Backend> backend);
  std::vector<std::string> backend_names() const;
  std::vector<DeviceInfo> devices() const;
  int open_device_count() const;
  const std::shared_ptr<CopyRouter>& router() const { return router_; }
  uint64_t next_session_id() { return ++session_counter_; }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<CopyRouter> router_ = std::make_shared<CopyRouter>();
  std::map<std::string, std::shared_ptr<Backend>> backends_;
  // Devices are owned by the sessions (and buffers) that use them; the Env only finds
  // them again while they live, and never hands out a device after its teardown.
  std::map<std::pair<std::string, int>, std::weak_ptr<Device>> devices_;
  std::atomic<uint64_t> session_counter_{0};
};

}  // namespace bulkhead
