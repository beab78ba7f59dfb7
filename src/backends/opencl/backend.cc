#include "backend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "device.h"

namespace bulkhead::opencl {
namespace {

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  if (clGetDeviceInfo(d, what, sizeof v, &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

std::string device_text(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  s.resize(std::strlen(s.c_str()));
  return s;
}

std::string platform_text(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  s.resize(std::strlen(s.c_str()));
  return s;
}

// Whether a CL_DEVICE_VERSION ("OpenCL <major>.<minor> <vendor text>") is 1.2 or later.
bool at_least_1_2(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return false;
  return major > 1 || (major == 1 && minor >= 2);
}

const char* type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "CPU";
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

Result<std::unique_ptr<Backend>> Backend::create(const BhpHost* host, const char* options) {
  std::unique_ptr<Backend> b(new Backend(host));
  OCL_TRY(b->parse_options(options ? options : ""));
  OCL_TRY(b->inject("create_backend"));
  return b;
}

Status Backend::parse_options(const std::string& options) {
  for (size_t at = 0; at <= options.size();) {
    const size_t end = std::min(options.find(',', at), options.size());
    const std::string item = trim(options.substr(at, end - at));
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return invalid_argument("option '" + item + "' is not key=value (expected policy=<policy> or fail_at=<step>)");
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (key == "policy") {
      OCL_ASSIGN(policy_, parse_policy(value, "backend option 'policy'"));
    } else if (key == "fail_at") {
      if (std::none_of(std::begin(kSteps), std::end(kSteps), [&](const char* s) { return value == s; })) {
        std::string steps;
        for (const char* s : kSteps) steps += std::string(steps.empty() ? "" : ", ") + s;
        return invalid_argument("option fail_at: unknown step '" + value + "' (expected one of " + steps + ")");
      }
      fail_at_ = value;
    } else {
      return invalid_argument("unknown option '" + key + "' (expected policy or fail_at)");
    }
  }
  return Status::ok();
}

void Backend::enumerate() const {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return;  // no ICD or no driver: no devices
  std::vector<cl_platform_id> platforms(np);
  if (clGetPlatformIDs(np, platforms.data(), nullptr) != CL_SUCCESS) return;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ids(nd);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr) != CL_SUCCESS) continue;
    const std::string platform = platform_text(p, CL_PLATFORM_NAME);
    for (cl_device_id id : ids) {
      const auto type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
      const std::string version = device_text(id, CL_DEVICE_VERSION);
      if (!(type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_ACCELERATOR)) || !at_least_1_2(version) ||
          !device_value<cl_bool>(id, CL_DEVICE_AVAILABLE) || !device_value<cl_bool>(id, CL_DEVICE_COMPILER_AVAILABLE))
        continue;
      DeviceEntry e;
      e.platform = p;
      e.id = id;
      e.name = device_text(id, CL_DEVICE_NAME);
      e.driver = platform + " " + device_text(id, CL_DRIVER_VERSION);
      e.policy = policy_.to_string() + " — " + policy_.why;
      const auto mem = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      e.detail = std::string(type_name(type)) + ", " + version.substr(0, version.find(' ', 7)) + ", " +
                 std::to_string(mem >> 20) + " MiB global memory";
      devices_.push_back(std::move(e));
    }
  }
}

Status Backend::describe(int32_t ordinal, BhpDeviceInfo* out) const {
  if (ordinal < 0 || ordinal >= device_count())
    return Status(BH_NOT_FOUND, "device " + std::to_string(ordinal) + " does not exist (" +
                                    std::to_string(device_count()) + " OpenCL device(s) found)");
  const DeviceEntry& d = devices()[ordinal];
  out->name = d.name.c_str();
  out->driver = d.driver.c_str();
  out->submit_policy = d.policy.c_str();
  out->detail = d.detail.c_str();
  out->memory_kind = BH_MEMORY_DEVICE_LOCAL;
  return Status::ok();
}

Result<std::unique_ptr<Device>> Backend::open_device(int32_t ordinal) const {
  BhpDeviceInfo unused{};
  OCL_TRY(describe(ordinal, &unused));
  return Device::open(*this, devices()[ordinal]);
}

Status Backend::inject(const char* step) const {
  if (fail_at_ != step) return Status::ok();
  return internal_error(std::string("injected failure at ") + step);
}

}  // namespace bulkhead::opencl
