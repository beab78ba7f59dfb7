// The OpenCL backend of one Env (BhpBackend): its options and the devices found when it
// was created. Immutable once created, so every member function is thread-safe; it keeps
// no process-global state (everything hangs off this object and what it opens).
//
// Options ("key=value" pairs separated by ','):
//   policy=<policy>  the devices' default submission policy (policy.h);
//   fail_at=<step>   failure injection for tests: the step (kSteps) fails with BH_INTERNAL
//                    "injected failure at <step>" after acquiring what precedes it in that
//                    call, proving that a partial construction is released.
#pragma once

#include <CL/cl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bulkhead/backend_plugin.h"
#include "policy.h"
#include "status.h"

namespace bulkhead::opencl {

class Device;

// The steps fail_at may name.
inline constexpr const char* kSteps[] = {"create_backend", "open_device",   "build_programs", "open_session",
                                         "allocate",       "create_kernel", "begin_run"};

// A device as enumerated, with the strings describe_device hands out.
struct DeviceEntry {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name, driver, policy, detail;
};

class Backend {
 public:
  // Parses `options`. The driver is not touched until a device is first asked about
  // (then every OpenCL 1.2+ GPU, CPU and accelerator device of every platform is
  // enumerated, once; no driver is no devices, not an error): loading the plugin starts
  // no driver threads, so a process may still fork() after it.
  static Result<std::unique_ptr<Backend>> create(const BhpHost* host, const char* options);

  const BhpHost& host() const { return *host_; }
  int32_t device_count() const { return static_cast<int32_t>(devices().size()); }
  Status describe(int32_t ordinal, BhpDeviceInfo* out) const;
  Result<std::unique_ptr<Device>> open_device(int32_t ordinal) const;
  const SubmitPolicy& default_policy() const { return policy_; }

  // An error when the options make `step` fail.
  Status inject(const char* step) const;

 private:
  explicit Backend(const BhpHost* host) : host_(host) {}
  Status parse_options(const std::string& options);
  void enumerate() const;
  const std::vector<DeviceEntry>& devices() const {
    std::call_once(enumerated_, [this] { enumerate(); });
    return devices_;
  }

  const BhpHost* host_;
  SubmitPolicy policy_;
  std::string fail_at_;
  mutable std::once_flag enumerated_;
  mutable std::vector<DeviceEntry> devices_;
};

}  // namespace bulkhead::opencl
