// The backend interface: Backend (a registered library) → Device (reference-counted,
// shared by every session on it) → per-session allocators and kernels.
//
// Ownership: an Env holds its Backends by shared_ptr; a Device is held by the sessions
// that use it (shared_ptr) and cached weakly by the Env, so the last session to go tears
// the device down (I4). A Device registers its transfers with the Env's CopyRouter when
// it opens and removes them when it is destroyed.
// Thread-safety: every method here may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/kernel.h"
#include "bulkhead/memory.h"
#include "memory/copy_router.h"

namespace bulkhead {

struct DeviceInfo {
  std::string backend;  // "cpu", "vulkan", ...
  int ordinal = 0;
  std::string name;     // human-readable device name
  std::string driver;   // driver / library version
  std::string submit_policy;  // the submission policy the device would use, and why
  std::string detail;   // anything else worth printing
  // The hardware that makes SessionOptions::precision "bf16" fast on this device ("AMX",
  // "AVX512-BF16"); empty where it has none, and the device then runs such sessions fp32.
  std::string bf16_units;
};

// What a device is told when a top-level run starts (Device::begin_run). Borrowed
// pointers, valid only during the call.
struct RunStart {
  // The session's allocator on this device (the one create_session_allocator made for
  // it): it names the session that is running.
  Allocator* session_allocator = nullptr;
  // The top-level nodes this device will dispatch in this run, in order (nodes folded at
  // compile time excluded; nodes inside subgraphs not listed).
  const std::vector<const ir::Node*>* nodes = nullptr;
  // The run's graph inputs, in graph order (none where an initializer default is used).
  const std::vector<Value>* inputs = nullptr;
  // Every run of this graph makes the same allocations and dispatches: static shapes, no
  // control flow (If/Loop/Scan). A device may then record the run once and replay it
  // (I6), when the session allows it (SessionConfig::graph_capture).
  bool capturable = false;
};

// What a device is told about a session opening on it (Device::open_session).
struct SessionConfig {
  std::string owner;          // names the session in messages and allocator names
  std::string submit_policy;  // GPU backends: the submission policy; "" = the device's default
  bool graph_capture = true;  // GPU backends: record once, replay (I6)
  // CPU: give the session's run memory back to the system once no run has been open for
  // this many milliseconds (SessionOptions::release_idle_after_ms; 0: as soon as none is,
  // < 0: never); other backends keep theirs.
  int release_idle_after_ms = -1;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  // The domain in which this device's kernels take inputs and write outputs.
  virtual const Domain& compute_domain() const = 0;
  // A new allocator for one session's memory on this device. It keeps the device alive.
  virtual std::shared_ptr<Allocator> create_session_allocator(const std::string& owner) = 0;
  // The session's allocator, after checking the options that concern this device (an
  // unknown submission policy is an error here). Default: create_session_allocator.
  virtual Result<std::shared_ptr<Allocator>> open_session(const SessionConfig& config) {
    return create_session_allocator(config.owner);
  }
  // The kernels this device can run (immutable).
  virtual const KernelTable& kernels() const = 0;
  // Prepares the calling thread for a run that uses `threads` intra-op threads; the
  // returned object restores the thread's previous settings when destroyed.
  virtual std::shared_ptr<void> enter_run(int threads) const { return nullptr; }
  // Optional per-run device state: the executor calls this once per top-level run for
  // each of the session's devices and hands the object to that device's kernels through
  // KernelContext::device_run_state() for the whole run, subgraphs included. The object
  // belongs to that one run (never shared with a concurrent run) and is destroyed on the
  // run's thread when the run ends, after its last kernel. Default: no state (the CPU
  // device has none, and pays one virtual call per run).
  virtual std::shared_ptr<void> begin_run(const RunStart& run) { return nullptr; }
  // Makes every write recorded so far in the run whose state is `run_state` (from
  // begin_run) complete and visible to the host and to copies: the executor calls it
  // before a value produced on this device is copied elsewhere and when the run ends.
  // Default: nothing to do (kernels that finish before compute() returns).
  virtual Status flush(void* run_state) { return Status::ok(); }
};

// Where a backend came from, for `bulkhead devices`.
struct BackendOrigin {
  std::string library;            // the plugin library's path; "" for a built-in backend
  uint32_t abi_version = 0;       // the plugin ABI version negotiated; 0 when built in
  std::string registered_by = "built in";  // "Env::load_backend", "--backend-lib", "host", ...
  std::string version;            // the plugin's own version, when it says
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual BackendOrigin origin() const { return {}; }
  // Devices this backend can open (may be empty: e.g. no Vulkan driver).
  virtual std::vector<DeviceInfo> enumerate() const = 0;
  // Opens device `ordinal`, registering its transfers with `router`. The device keeps
  // `router` alive and unregisters from it when destroyed.
  virtual Result<std::shared_ptr<Device>> open_device(int ordinal, std::shared_ptr<CopyRouter> router) = 0;
};

// The built-in CPU backend.
std::shared_ptr<Backend> make_cpu_backend();

}  // namespace bulkhead
