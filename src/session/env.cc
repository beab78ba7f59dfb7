#include <algorithm>
#include <charconv>
#include <cstring>

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
    if (b == backends_.end()) {
      std::string avail;
      for (auto& [n, x] : backends_) avail += (avail.empty() ? "" : ", ") + n;
      return not_found("unknown device '" + spec + "' (backends available: " + avail + ")");
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
std::vector<std::string> Env::backends() const { return impl_->backend_names(); }
std::vector<DeviceInfo> Env::devices() const { return impl_->devices(); }
int Env::open_device_count() const { return impl_->open_device_count(); }

}  // namespace bulkhead
