// The host side of the backend plugin ABI (include/bulkhead/backend_plugin.h): a plugin
// library's objects seen through bulkhead's C++ backend interface (backend.h).
//
// Ownership (I4): the chain of shared_ptrs is the ABI's tree, so teardown follows it on
// whichever thread drops the last reference —
//   Buffer → SessionAllocator (BhpSession) → Device (BhpDevice) → Backend (BhpBackend)
//   → Library (dlclose, unless the host application loaded it),
// and a Kernel (BhpKernel) or a run's state (BhpRun) holds the device (and the session)
// it came from. An Env holds its plugin backends like any other; unloading one drops the
// Env's reference only.
//
// Thread-safety: everything here may be used from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace bulkhead::plugin {

// The ABI entry's type (BhpEntryFn), spelled without the C header.
using EntryFn = int32_t (*)(const uint32_t* host_versions, uint32_t num_host_versions, uint32_t* chosen_version,
                            const void** table);

// The ABI versions this host speaks.
inline constexpr uint32_t kHostAbiVersions[] = {1};

struct LoadRequest {
  std::string path;           // the library (dlopen'd and closed by bulkhead when unused)
  EntryFn entry = nullptr;    // or an entry the host application resolved itself: never closed
  std::string label;          // names a host-given entry in messages and listings
  std::string options;        // passed to create_backend
  std::string registered_by;  // for `bulkhead devices`
  std::string expect_name;    // when set, the backend's name the plugin must give (discovery)
};

// Loads a plugin and creates its backend for one Env. Errors: a file that is missing or
// no shared library, no entry symbol, no ABI version in common (naming both), a table
// missing a required function, or the plugin's own failure to create its backend. On
// error nothing stays loaded.
Result<std::shared_ptr<Backend>> load(const LoadRequest& request);

// Whether `backend` came from a plugin library.
bool is_plugin(const Backend& backend);

// A plugin device's counters (BhpCounters), for the self-test, tests and benchmarks.
// False for other devices and for plugins without the optional `counters`.
struct Counters {
  uint64_t submits = 0, run_submits = 0, dispatches = 0, replays = 0, memory_bytes = 0;
};
bool counters(const Device& device, Counters* out);
bool is_plugin_device(const Device& device);

}  // namespace bulkhead::plugin
