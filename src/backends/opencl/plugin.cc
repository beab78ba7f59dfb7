// The plugin's C ABI (bulkhead/backend_plugin.h, version 1): the entry, the function table
// and the boundary where the C++ inside meets it. Each ABI object is one C++ object
// (BhpBackend = Backend, BhpDevice = Device, BhpSession = Session, BhpRun = Run,
// BhpKernel = Kernel, a buffer's handle = its cl_mem); no exception leaves a function:
// each is caught and returned as a status made by the host.
#include <cstring>
#include <exception>
#include <new>

#include "backend.h"
#include "device.h"
#include "kernel.h"
#include "ops/families.h"
#include "session.h"

namespace bulkhead::opencl {
namespace {

constexpr uint32_t kAbiVersion = 1;

template <class T, class A>
T* from_abi(A* p) {
  return reinterpret_cast<T*>(p);
}
template <class A, class T>
A* to_abi(T* p) {
  return reinterpret_cast<A*>(p);
}

BhpStatus* make(const BhpHost& host, int32_t code, const std::string& message) {
  return host.make_status(host.context, code, message.c_str());
}

BhpStatus* to_status(const BhpHost& host, const Status& s) {
  if (s.is_ok()) return nullptr;
  if (s.host_status()) return s.host_status();  // the host's own, handed back
  return make(host, s.code(), s.message());
}

// Runs `f` (returning a Status), turning any exception into a status.
template <class F>
BhpStatus* guard(const BhpHost& host, F&& f) {
  try {
    return to_status(host, f());
  } catch (const std::bad_alloc&) {
    return make(host, BH_RESOURCE_EXHAUSTED, "out of host memory");
  } catch (const std::exception& e) {
    return make(host, BH_INTERNAL, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return make(host, BH_INTERNAL, "unexpected exception");
  }
}

// For the functions that return nothing: an exception is logged, never thrown on.
template <class F>
void guard_void(const BhpHost& host, const char* what, F&& f) noexcept {
  try {
    f();
  } catch (...) {
    if (host.log) host.log(host.context, BHP_LOG_ERROR, (std::string(what) + " failed with an exception").c_str());
  }
}

Status null_argument(const char* what) { return invalid_argument(std::string(what) + " is NULL"); }

const BhpHost& host_of(const Backend* b) { return b->host(); }
const BhpHost& host_of(const Device* d) { return d->backend().host(); }
const BhpHost& host_of(const Session* s) { return host_of(&s->device()); }

// --- backend ---

BhpStatus* create_backend(const BhpHost* host, const char* options, BhpBackend** out) {
  if (!host || !host->make_status) {
    // No way to make a status (a real host always passes one): fail by handing out nothing.
    if (out) *out = nullptr;
    return nullptr;
  }
  return guard(*host, [&]() -> Status {
    if (!out) return null_argument("out");
    if (host->struct_size < sizeof(BhpHost)) return invalid_argument("BhpHost is smaller than ABI version 1's");
    OCL_ASSIGN(std::unique_ptr<Backend> b, Backend::create(host, options));
    *out = to_abi<BhpBackend>(b.release());
    return Status::ok();
  });
}

void destroy_backend(BhpBackend* backend) { delete from_abi<Backend>(backend); }

BhpStatus* device_count(BhpBackend* backend, int32_t* count) {
  auto* b = from_abi<Backend>(backend);
  return guard(host_of(b), [&]() -> Status {
    if (!count) return null_argument("count");
    *count = b->device_count();
    return Status::ok();
  });
}

BhpStatus* describe_device(BhpBackend* backend, int32_t ordinal, BhpDeviceInfo* out) {
  auto* b = from_abi<Backend>(backend);
  return guard(host_of(b), [&]() -> Status {
    if (!out) return null_argument("out");
    if (out->struct_size < sizeof(BhpDeviceInfo))
      return invalid_argument("BhpDeviceInfo is smaller than ABI version 1's");
    BhpDeviceInfo info = *out;
    OCL_TRY(b->describe(ordinal, &info));
    *out = info;
    return Status::ok();
  });
}

// --- devices ---

BhpStatus* open_device(BhpBackend* backend, int32_t ordinal, BhpDevice** out) {
  auto* b = from_abi<Backend>(backend);
  return guard(host_of(b), [&]() -> Status {
    if (!out) return null_argument("out");
    OCL_ASSIGN(std::unique_ptr<Device> d, b->open_device(ordinal));
    *out = to_abi<BhpDevice>(d.release());
    return Status::ok();
  });
}

void close_device(BhpDevice* device) {
  auto* d = from_abi<Device>(device);
  if (d) guard_void(host_of(d), "close_device", [&] { delete d; });
}

BhpStatus* list_ops(BhpDevice* device, const BhpOpInfo** ops, uint32_t* count) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!ops || !count) return null_argument("ops or count");
    *ops = d->ops().data();
    *count = static_cast<uint32_t>(d->ops().size());
    return Status::ok();
  });
}

// --- memory and transfers ---

BhpStatus* allocate(BhpDevice* device, BhpSession*, uint64_t bytes, BhpBuffer* out) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!out) return null_argument("out");
    OCL_ASSIGN(cl_mem mem, d->allocate(bytes));
    out->handle = mem;
    out->host_data = nullptr;  // device-local
    return Status::ok();
  });
}

void free_buffer(BhpDevice* device, BhpSession*, void* handle) {
  auto* d = from_abi<Device>(device);
  if (d && handle) guard_void(host_of(d), "free_buffer", [&] { d->free(static_cast<cl_mem>(handle)); });
}

BhpStatus* write_buffer(BhpDevice* device, void* handle, uint64_t offset, const void* src, uint64_t bytes) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!src && bytes) return null_argument("src");
    return d->write(static_cast<cl_mem>(handle), offset, src, bytes);
  });
}

BhpStatus* read_buffer(BhpDevice* device, void* handle, uint64_t offset, void* dst, uint64_t bytes) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!dst && bytes) return null_argument("dst");
    return d->read(static_cast<cl_mem>(handle), offset, dst, bytes);
  });
}

BhpStatus* copy_buffer(BhpDevice* device, void* src, uint64_t src_offset, void* dst, uint64_t dst_offset,
                       uint64_t bytes) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    return d->copy(static_cast<cl_mem>(src), src_offset, static_cast<cl_mem>(dst), dst_offset, bytes);
  });
}

// --- kernels ---

BhpStatus* create_kernel(BhpDevice* device, const BhpNode* node, BhpKernel** out) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!node || !out) return null_argument("node or out");
    const Node n(*node);
    if (node->domain && *node->domain && std::strcmp(node->domain, "ai.onnx") != 0)
      return unsupported(n.where() + "the OpenCL backend runs the default ONNX domain only");
    OCL_ASSIGN(OpPtr op, make_op_for(n));
    auto k = std::make_unique<Kernel>(*d, n.where(), std::move(op));
    OCL_TRY(d->backend().inject("create_kernel"));
    *out = to_abi<BhpKernel>(k.release());
    return Status::ok();
  });
}

void destroy_kernel(BhpKernel* kernel) { delete from_abi<Kernel>(kernel); }

BhpStatus* compute(const BhpKernel* kernel, const BhpKernelCall* call) {
  const auto* k = from_abi<const Kernel>(kernel);
  return guard(host_of(&k->device()), [&]() -> Status {
    if (!call) return null_argument("call");
    return k->compute(*call);
  });
}

// --- sessions and runs ---

BhpStatus* open_session(BhpDevice* device, const BhpSessionConfig* config, BhpSession** out) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!config || !out) return null_argument("config or out");
    OCL_ASSIGN(std::unique_ptr<Session> s, Session::open(*d, *config));
    *out = to_abi<BhpSession>(s.release());
    return Status::ok();
  });
}

void close_session(BhpSession* session) {
  auto* s = from_abi<Session>(session);
  if (s) guard_void(host_of(s), "close_session", [&] { delete s; });
}

BhpStatus* begin_run(BhpSession* session, const BhpRunInfo*, BhpRun** out) {
  auto* s = from_abi<Session>(session);
  return guard(host_of(s), [&]() -> Status {
    if (!out) return null_argument("out");
    OCL_ASSIGN(std::unique_ptr<Run> r, s->begin_run());
    *out = to_abi<BhpRun>(r.release());
    return Status::ok();
  });
}

BhpStatus* flush(BhpRun* run) {
  auto* r = from_abi<Run>(run);
  return guard(host_of(&r->session()), [&] { return r->flush(); });
}

void end_run(BhpRun* run, int32_t) {
  auto* r = from_abi<Run>(run);
  if (r) guard_void(host_of(&r->session()), "end_run", [&] { delete r; });
}

BhpStatus* counters(BhpDevice* device, BhpCounters* out) {
  auto* d = from_abi<Device>(device);
  return guard(host_of(d), [&]() -> Status {
    if (!out) return null_argument("out");
    if (out->struct_size < sizeof(BhpCounters)) return invalid_argument("BhpCounters is smaller than ABI version 1's");
    d->counters(out);
    return Status::ok();
  });
}

const BhpPluginV1 kTable = {
    sizeof(BhpPluginV1), kAbiVersion, "opencl",      "0.1.0",        create_backend, destroy_backend, device_count,
    describe_device,     open_device, close_device,  list_ops,       allocate,       free_buffer,     write_buffer,
    read_buffer,         copy_buffer, create_kernel, destroy_kernel, compute,        open_session,    close_session,
    begin_run,           flush,       end_run,       counters,
};

}  // namespace
}  // namespace bulkhead::opencl

extern "C" BHP_EXPORT int32_t bh_backend_plugin_entry(const uint32_t* host_versions, uint32_t num_host_versions,
                                                      uint32_t* chosen_version, const void** table) {
  using bulkhead::opencl::kAbiVersion;
  for (uint32_t i = 0; host_versions && i < num_host_versions; ++i) {
    if (host_versions[i] != kAbiVersion) continue;
    if (chosen_version) *chosen_version = kAbiVersion;
    if (table) *table = &bulkhead::opencl::kTable;
    return 0;
  }
  if (chosen_version) *chosen_version = kAbiVersion;  // the newest this plugin speaks
  return 1;
}
