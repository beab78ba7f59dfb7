#include <cstdio>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backends/faulty/faulty_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "common/sizes.h"
#include "session/env_impl.h"

namespace bulkhead {

const char* version() { return BULKHEAD_VERSION; }

EnvImpl::EnvImpl() {
  backends_["cpu"] = make_cpu_backend();
  // A test instrument (field reports A-D on purpose): only used when a session names it.
  backends_["faulty"] = make_faulty_backend();
  backends_["vulkan"] = make_vulkan_backend();
  // Plugin libraries every Env of the process loads (the CLI's --backend-lib sets this,
  // so that worker processes load them too).
  if (const char* libs = std::getenv("BULKHEAD_BACKEND_LIBS"))
    for (const std::string& path : split_list(libs)) {
      plugin::LoadRequest r;
      r.path = path;
      r.registered_by = "BULKHEAD_BACKEND_LIBS";
      if (Status st = load_backend(r); !st.is_ok()) load_errors_.push_back(st.message());
    }
}

namespace {

// The directory of the program or library this code is linked into.
std::string module_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&module_dir), &info) || !info.dli_fname) return "";
  // For code in the program itself dli_fname is argv[0]-like ("bulkhead", "./bulkhead").
  std::error_code ec;
  std::string f = info.dli_fname;
  auto p = std::filesystem::canonical(f.find('/') == std::string::npos ? "/proc/self/exe" : f, ec);
  return ec ? std::string() : p.parent_path().string();
}

bool plain_name(const std::string& n) {
  if (n.empty() || n.size() > 32) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> r;
  size_t b = 0;
  while (b <= text.size()) {
    size_t e = text.find(':', b);
    if (e == std::string::npos) e = text.size();
    if (e > b) r.push_back(text.substr(b, e - b));
    b = e + 1;
  }
  return r;
}

Status EnvImpl::load_backend(const plugin::LoadRequest& request) {
  BH_ASSIGN_OR_RETURN(auto backend, plugin::load(request));
  std::lock_guard lock(mu_);
  std::string n = backend->name();
  auto it = backends_.find(n);
  if (it != backends_.end()) {
    std::string from = it->second->origin().library;
    return invalid_argument("backend library '" + backend->origin().library + "': a backend named '" + n +
                            "' is already registered" + (from.empty() ? " (built in)" : " (from '" + from + "')") +
                            "; unload it first");
  }
  backends_[n] = std::move(backend);
  unloaded_.erase(n);
  return Status::ok();
}

Status EnvImpl::unload_backend(const std::string& name) {
  std::shared_ptr<Backend> gone;  // released outside the lock: it may close the library
  {
    std::lock_guard lock(mu_);
    auto it = backends_.find(name);
    if (it == backends_.end()) return not_found("unload_backend: no backend named '" + name + "' is registered");
    if (!plugin::is_plugin(*it->second))
      return Status(StatusCode::kFailedPrecondition, "unload_backend: '" + name + "' is built in and cannot be unloaded");
    gone = std::move(it->second);
    backends_.erase(it);
    unloaded_.insert(name);
    // The devices still open stay with their sessions; none is handed out again.
    for (auto d = devices_.begin(); d != devices_.end();) {
      if (d->first.first == name) d = devices_.erase(d);
      else ++d;
    }
  }
  return Status::ok();
}

std::vector<std::pair<std::string, BackendOrigin>> EnvImpl::backend_origins() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, BackendOrigin>> r;
  for (auto& [n, b] : backends_) r.emplace_back(n, b->origin());
  return r;
}

std::vector<std::string> EnvImpl::search_dirs() {
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("BULKHEAD_BACKEND_PATH")) dirs = split_list(p);
  std::string here = module_dir();
  if (!here.empty()) {
    // The build tree keeps plugins beside the program and libbulkhead.so; an install
    // puts them in LIBDIR/bulkhead (beside libbulkhead.so, or ../lib from bin).
    dirs.push_back(here);
    dirs.push_back(here + "/bulkhead");
    dirs.push_back(here + "/../lib/bulkhead");
  }
  return dirs;
}

bool EnvImpl::discover(const std::string& name, Status* error) {
  if (!plain_name(name)) return false;
  {
    std::lock_guard lock(mu_);
    if (unloaded_.count(name) || backends_.count(name)) return false;
  }
  for (const auto& dir : search_dirs()) {
    std::string path = dir + "/libbulkhead_" + name + ".so";
    if (path.front() != '/' && path.rfind("./", 0) != 0) path = "./" + path;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    plugin::LoadRequest r;
    r.path = path;
    r.expect_name = name;
    r.registered_by = "discovered in " + dir;
    *error = load_backend(r);
    return true;
  }
  return false;
}

void EnvImpl::discover_all() {
  for (const auto& dir : search_dirs()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      std::string f = e.path().filename().string();
      if (f.size() <= 15 || f.rfind("libbulkhead_", 0) != 0 || f.substr(f.size() - 3) != ".so") continue;
      Status st;
      if (discover(f.substr(12, f.size() - 15), &st) && !st.is_ok()) {
        std::lock_guard lock(mu_);
        if (std::find(load_errors_.begin(), load_errors_.end(), st.message()) == load_errors_.end())
          load_errors_.push_back(st.message());
      }
    }
  }
}

std::vector<std::string> EnvImpl::load_errors() const {
  std::lock_guard lock(mu_);
  return load_errors_;
}

void EnvImpl::warn_once(const std::string& key, const std::string& line) {
  {
    std::lock_guard lock(mu_);
    if (!warned_.insert(key).second) return;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

Status EnvImpl::register_backend(std::shared_ptr<Backend> backend) {
  if (!backend) return invalid_argument("register_backend: null backend");
  std::lock_guard lock(mu_);
  std::string n = backend->name();
  if (backends_.count(n)) return invalid_argument("a backend named '" + n + "' is already registered");
  backends_[n] = std::move(backend);
  return Status::ok();
}

std::vector<std::string> EnvImpl::backend_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> r;
  for (auto& [n, b] : backends_) r.push_back(n);
  return r;
}

std::vector<DeviceInfo> EnvImpl::devices() const {
  std::vector<std::shared_ptr<Backend>> bs;
  {
    std::lock_guard lock(mu_);
    for (auto& [n, b] : backends_) bs.push_back(b);
  }
  std::vector<DeviceInfo> r;
  for (auto& b : bs)
    for (auto& d : b->enumerate()) r.push_back(d);
  return r;
}

int EnvImpl::open_device_count() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (auto& [k, w] : devices_) n += !w.expired();
  return n;
}

Result<Tensor> EnvImpl::allocate_zeroed(const std::string& spec, DataType dtype, const Shape& shape) {
  if (dtype == DataType::kString || dtype_size(dtype) == 0)
    return invalid_argument("a device tensor of element type " + dtype_name(dtype) + " is refused (strings live on the host)");
  BH_ASSIGN_OR_RETURN(size_t bytes, tensor_nbytes(dtype, shape));
  BH_ASSIGN_OR_RETURN(auto dev, acquire_device(spec));
  auto alloc = dev->create_session_allocator("user tensor");
  BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*alloc, dtype, shape));
  if (bytes == 0) return t;
  if (t.raw()) {
    std::memset(t.raw(), 0, bytes);
    return t;
  }
  Tensor zeros = Tensor::host(dtype, shape);
  std::memset(zeros.raw(), 0, bytes);
  BH_RETURN_IF_ERROR(router_->copy(zeros, t));
  return t;
}

Result<std::shared_ptr<Device>> EnvImpl::acquire_device(const std::string& spec) {
  // NAME, NAME:INDEX, or NAME:DEVICE where DEVICE is a DeviceInfo.name ("faulty:global-slot").
  std::string name = spec, which;
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    name = spec.substr(0, colon);
    which = spec.substr(colon + 1);
    if (which.empty()) return invalid_argument("bad device '" + spec + "': expected NAME or NAME:INDEX, e.g. cpu or vulkan:0");
  }
  std::shared_ptr<Backend> backend;
  {
    std::lock_guard lock(mu_);
    auto b = backends_.find(name);
    if (b != backends_.end()) backend = b->second;
  }
  if (!backend) {
    // Not registered: a plugin of that name in the search path.
    Status loaded;
    if (discover(name, &loaded) && !loaded.is_ok()) return loaded.with_context("device '" + spec + "': ");
    std::lock_guard lock(mu_);
    auto b = backends_.find(name);
    if (b == backends_.end()) {
      std::string avail, failed;
      for (auto& [n, x] : backends_) avail += (avail.empty() ? "" : ", ") + n;
      for (auto& e : load_errors_) failed += "; " + e;
      return not_found("unknown device '" + spec + "' (backends available: " + avail + ")" + failed);
    }
    backend = b->second;
  }
  int ordinal = 0;
  if (!which.empty()) {
    auto [p, ec] = std::from_chars(which.data(), which.data() + which.size(), ordinal);
    bool numeric = ec == std::errc() && p == which.data() + which.size();
    if (numeric && ordinal < 0)
      return invalid_argument("bad device '" + spec + "': expected NAME or NAME:INDEX, e.g. cpu or vulkan:0");
    if (!numeric) {
      auto devs = backend->enumerate();  // outside the lock: enumeration may ask a driver
      auto d = std::find_if(devs.begin(), devs.end(), [&](const DeviceInfo& di) { return di.name == which; });
      if (d == devs.end()) {
        std::string names;
        for (auto& di : devs) names += (names.empty() ? "" : ", ") + std::to_string(di.ordinal) + " '" + di.name + "'";
        return not_found("unknown device '" + spec + "': backend '" + name + "' has no device named '" + which +
                         "' (its devices: " + (names.empty() ? "none" : names) + ")");
      }
      ordinal = d->ordinal;
    }
  }
  std::lock_guard lock(mu_);
  auto& slot = devices_[{name, ordinal}];
  if (auto d = slot.lock()) return d;
  BH_ASSIGN_OR_RETURN(auto dev, backend->open_device(ordinal, router_));
  slot = dev;
  return dev;
}

Env::Env() : impl_(std::make_shared<EnvImpl>()) {}
Env::~Env() = default;

Status Env::copy(const Tensor& src, const Tensor& dst) const { return impl_->router()->copy(src, dst); }
Status Env::register_backend(std::shared_ptr<Backend> backend) const { return impl_->register_backend(std::move(backend)); }
Status Env::load_backend(const std::string& path, const std::string& options) const {
  plugin::LoadRequest r;
  r.path = path;
  r.options = options;
  r.registered_by = "Env::load_backend";
  return impl_->load_backend(r);
}
Status Env::add_backend_library(BackendEntry entry, const std::string& label, const std::string& options) const {
  if (!entry) return invalid_argument("add_backend_library: null entry");
  plugin::LoadRequest r;
  r.entry = entry;
  r.label = label;
  r.options = options;
  r.registered_by = "host (add_backend_library)";
  return impl_->load_backend(r);
}
Status Env::unload_backend(const std::string& name) const { return impl_->unload_backend(name); }
std::vector<std::pair<std::string, BackendOrigin>> Env::backend_origins() const { return impl_->backend_origins(); }
std::vector<std::string> Env::backends() const { return impl_->backend_names(); }
std::vector<DeviceInfo> Env::devices() const {
  impl_->discover_all();  // every plugin in the search path, as `bulkhead devices` lists them
  return impl_->devices();
}
int Env::open_device_count() const { return impl_->open_device_count(); }
Env::SharedWeights Env::shared_weights() const {
  SharedConstants::Stats st = impl_->shared_constants()->stats();
  SharedWeights w;
  w.tensors = st.tensors;
  w.bytes = st.tensor_bytes;
  w.packed = st.made;
  w.packed_bytes = st.made_bytes;
  w.tensor_hits = st.tensor_hits;
  w.hit_bytes = st.hit_bytes;
  w.packed_hits = st.made_hits;
  return w;
}

}  // namespace bulkhead
