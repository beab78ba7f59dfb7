// EnvImpl: what an Env handle shares — backends, the weak device cache, the router.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "backend/plugin_host.h"
#include "backend/shared_constants.h"
#include "bulkhead/bulkhead.hpp"
#include "memory/copy_router.h"

namespace bulkhead {

// "a:b::c" → {"a", "b", "c"}: the entries of a colon-separated list (a PATH-like variable).
std::vector<std::string> split_list(const std::string& text);

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
  // Plugins (plugin_host.h): loads and registers; unloads (drops the Env's references).
  Status load_backend(const plugin::LoadRequest& request);
  Status unload_backend(const std::string& name);
  std::vector<std::pair<std::string, BackendOrigin>> backend_origins() const;
  // Finds `name` in the plugin search path (BULKHEAD_BACKEND_PATH, then beside the
  // program) as libbulkhead_<name>.so and loads it; false when there is none.
  // (*error says whether the one found loaded.)
  bool discover(const std::string& name, Status* error);
  static std::vector<std::string> search_dirs();
  // Loads every libbulkhead_<name>.so of the search path not yet registered (failures
  // go to load_errors()).
  void discover_all();
  // Plugin libraries that failed to load (BULKHEAD_BACKEND_LIBS, discovery), one line each.
  std::vector<std::string> load_errors() const;
  std::vector<std::string> backend_names() const;
  std::vector<DeviceInfo> devices() const;
  int open_device_count() const;
  const std::shared_ptr<CopyRouter>& router() const { return router_; }
  uint64_t next_session_id() { return ++session_counter_; }
  // What this Env's sessions share (SessionOptions::share_weights); never another Env's.
  const std::shared_ptr<SharedConstants>& shared_constants() const { return shared_; }
  // Prints `line` on stderr the first time this Env sees `key` (a fallback a user should
  // hear of once, not once per session); thread-safe.
  void warn_once(const std::string& key, const std::string& line);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<CopyRouter> router_ = std::make_shared<CopyRouter>();
  std::map<std::string, std::shared_ptr<Backend>> backends_;
  // Devices are owned by the sessions (and buffers) that use them; the Env only finds
  // them again while they live, and never hands out a device after its teardown.
  std::map<std::pair<std::string, int>, std::weak_ptr<Device>> devices_;
  std::atomic<uint64_t> session_counter_{0};
  std::shared_ptr<SharedConstants> shared_ = std::make_shared<SharedConstants>();
  // Backend libraries named in BULKHEAD_BACKEND_LIBS that failed to load when the Env was
  // made, by path: reported when a device of an unknown backend is asked for.
  std::vector<std::string> load_errors_;
  // Plugin backends unloaded from this Env: never discovered again (load_backend may).
  std::set<std::string> unloaded_;
  std::set<std::string> warned_;  // warn_once keys (under mu_)
};

}  // namespace bulkhead
