#include "backend/plugin_host.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>

#include "bulkhead/backend_plugin.h"

// The host's status object: what a plugin returns, owned by the host from then on.
struct BhpStatus {
  bulkhead::Status status;
};

namespace bulkhead::plugin {
namespace {

// Takes a status a plugin returned: ok for NULL, otherwise its error with `prefix`.
Status take(BhpStatus* s, const std::string& prefix) {
  if (!s) return Status::ok();
  Status r = std::move(s->status);
  delete s;
  return r.with_context(prefix);
}

BhpStatus* make_status(void*, int32_t code, const char* message) {
  auto c = static_cast<StatusCode>(code);
  if (code <= 0 || code > static_cast<int32_t>(StatusCode::kDeadlineExceeded)) c = StatusCode::kInternal;
  return new BhpStatus{Status(c, message ? message : "")};
}

// The library: a dlopen handle closed when the last object made from it is gone, or a
// host-given entry that bulkhead never closes.
struct Library {
  void* handle = nullptr;  // null for a host-given entry
  std::string path;        // or the host's label
  const BhpPluginV1* table = nullptr;
  uint32_t abi = 0;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

class PluginBackend;
class PluginDevice;

// The host state a backend's BhpHost points at: its name, for the log.
struct HostContext {
  std::string name;
};

void log_line(void* context, int32_t level, const char* message) {
  if (level < BHP_LOG_WARNING) return;
  auto* h = static_cast<HostContext*>(context);
  std::fprintf(stderr, "bulkhead: backend '%s': %s: %s\n", h->name.c_str(), level >= BHP_LOG_ERROR ? "error" : "warning",
               message ? message : "");
}

class PluginBackend final : public Backend, public std::enable_shared_from_this<PluginBackend> {
 public:
  PluginBackend(std::shared_ptr<Library> lib, BackendOrigin origin)
      : lib_(std::move(lib)), origin_(std::move(origin)), context_{lib_->table->name} {
    host_.struct_size = sizeof(BhpHost);
    host_.abi_version = lib_->abi;
    host_.context = &context_;
    host_.make_status = make_status;
    host_.log = log_line;
  }
  ~PluginBackend() override {
    if (backend_) lib_->table->destroy_backend(backend_);
  }
  Status create(const std::string& options) {
    return take(table().create_backend(&host_, options.c_str(), &backend_), name() + ": ");
  }

  std::string name() const override { return context_.name; }
  BackendOrigin origin() const override { return origin_; }
  std::vector<DeviceInfo> enumerate() const override {
    std::vector<DeviceInfo> r;
    int32_t n = 0;
    if (!take(table().device_count(backend_, &n), "").is_ok()) return r;
    for (int32_t i = 0; i < n; ++i) {
      auto d = describe(i);
      if (d.is_ok()) r.push_back(std::move(d).value());
    }
    return r;
  }
  Result<std::shared_ptr<Device>> open_device(int ordinal, std::shared_ptr<CopyRouter> router) override;

  const BhpPluginV1& table() const { return *lib_->table; }
  BhpBackend* raw() const { return backend_; }
  // The device as the plugin describes it; `kind` (optional) gets its compute memory's kind.
  Result<DeviceInfo> describe(int ordinal, MemoryKind* kind = nullptr) const {
    BhpDeviceInfo di{};
    di.struct_size = sizeof di;
    BH_RETURN_IF_ERROR(take(table().describe_device(backend_, ordinal, &di), name() + ":" + std::to_string(ordinal) + ": "));
    DeviceInfo d;
    d.backend = name();
    d.ordinal = ordinal;
    auto str = [](const char* s) { return std::string(s ? s : ""); };
    d.name = str(di.name);
    d.driver = str(di.driver);
    d.submit_policy = str(di.submit_policy);
    d.detail = str(di.detail);
    if (kind) *kind = di.memory_kind == BH_MEMORY_HOST_VISIBLE ? MemoryKind::kHostVisible : MemoryKind::kDeviceLocal;
    return d;
  }

 private:
  std::shared_ptr<Library> lib_;
  BackendOrigin origin_;
  HostContext context_;
  BhpHost host_{};
  BhpBackend* backend_ = nullptr;
};

class SessionAllocator;

// One run on a plugin device (Device::begin_run): the plugin's BhpRun, and every buffer
// the run's calls touched since the last flush (kept until the work is complete).
struct RunState {
  std::shared_ptr<SessionAllocator> session;
  BhpRun* run = nullptr;
  Status error;  // begin_run's failure, reported by the run's first kernel
  bool failed = false;
  std::vector<std::shared_ptr<Buffer>> in_flight;
  ~RunState();
};

class PluginDevice final : public Device, public std::enable_shared_from_this<PluginDevice> {
 public:
  PluginDevice(std::shared_ptr<PluginBackend> backend, BhpDevice* device, DeviceInfo info, MemoryKind kind,
               std::shared_ptr<CopyRouter> router)
      : backend_(std::move(backend)), device_(device), info_(std::move(info)), router_(std::move(router)) {
    domain_.id = Domain::new_id();
    domain_.backend = info_.backend;
    domain_.device = info_.ordinal;
    domain_.kind = kind;
    where_ = info_.backend + ":" + std::to_string(info_.ordinal) + ": ";
  }
  ~PluginDevice() override {
    if (registered_) router_->remove_domain(domain_.id);
    table().close_device(device_);
  }
  Status init();

  const DeviceInfo& info() const override { return info_; }
  const Domain& compute_domain() const override { return domain_; }
  std::shared_ptr<Allocator> create_session_allocator(const std::string& owner) override {
    auto a = open_session(SessionConfig{owner, "", true});
    return a.is_ok() ? std::move(a).value() : nullptr;
  }
  Result<std::shared_ptr<Allocator>> open_session(const SessionConfig& config) override;
  const KernelTable& kernels() const override { return kernels_; }
  std::shared_ptr<void> begin_run(const RunStart& run) override;
  Status flush(void* run_state) override {
    auto* rs = static_cast<RunState*>(run_state);
    if (!rs->run) return Status::ok();
    Status s = take(table().flush(rs->run), where_);
    rs->failed = rs->failed || !s.is_ok();
    rs->in_flight.clear();
    return s;
  }

  const BhpPluginV1& table() const { return backend_->table(); }
  BhpDevice* raw() const { return device_; }
  const std::string& where() const { return where_; }
  // The plugin buffer of a tensor in this device's domain; an error naming both domains
  // for any other tensor (I2: a buffer is never handed to a backend that cannot read it).
  Result<void*> handle_of(const Tensor& t, const std::string& what) const {
    if (t.domain() != domain_)
      return invalid_argument(what + " is in " + t.domain().to_string() + ", which " + domain_.to_string() + " cannot read");
    return t.buffer() ? t.buffer()->handle() : nullptr;
  }

 private:
  Result<std::unique_ptr<Kernel>> make_kernel(const KernelInfo& info);

  std::shared_ptr<PluginBackend> backend_;
  BhpDevice* device_;
  DeviceInfo info_;
  Domain domain_;
  std::shared_ptr<CopyRouter> router_;
  bool registered_ = false;
  KernelTable kernels_;
  std::string where_;
};

// A session's memory and execution state on a plugin device (BhpSession).
class SessionAllocator final : public Allocator {
 public:
  SessionAllocator(std::shared_ptr<PluginDevice> device, BhpSession* session, std::string owner)
      : device_(std::move(device)), session_(session), owner_(std::move(owner)) {}
  ~SessionAllocator() override { device_->table().close_session(session_); }

  const Domain& domain() const override { return device_->compute_domain(); }
  std::string name() const override { return owner_; }
  AllocatorStats stats() const override {
    std::lock_guard l(mu_);
    return stats_;
  }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override {
    BhpBuffer b{};
    b.struct_size = sizeof b;
    BH_RETURN_IF_ERROR(take(device_->table().allocate(device_->raw(), session_, size, &b),
                            device_->where() + "allocating " + std::to_string(size) + " bytes: "));
    if (!b.handle) return internal_error(device_->where() + "allocate returned no buffer");
    count(static_cast<int64_t>(size));
    return std::make_shared<Buffer>(shared_from_this(), domain(), b.host_data, size, b.handle);
  }
  void release(void* data, void* handle, size_t size) override {
    device_->table().free_buffer(device_->raw(), session_, handle);
    count(-static_cast<int64_t>(size));
  }

  BhpSession* raw() const { return session_; }
  PluginDevice& device() const { return *device_; }

 private:
  void count(int64_t delta) {
    std::lock_guard l(mu_);
    stats_.in_use = static_cast<size_t>(static_cast<int64_t>(stats_.in_use) + delta);
    stats_.peak = std::max(stats_.peak, stats_.in_use);
  }
  std::shared_ptr<PluginDevice> device_;
  BhpSession* session_;
  std::string owner_;
  mutable std::mutex mu_;
  AllocatorStats stats_;
};

RunState::~RunState() {
  in_flight.clear();
  if (run) session->device().table().end_run(run, failed ? 0 : 1);
}

// The host's side of one kernel call (BhpKernelCall::context).
struct CallContext {
  KernelContext* ctx;
  PluginDevice* device;
  RunState* run;
  std::deque<Shape> shapes;  // dims handed to the plugin, stable for the call
  std::vector<std::shared_ptr<Buffer>> touched;  // kept by the run until its flush

  void fill(const Tensor& t, BhpTensor* out) {
    shapes.push_back(t.shape());
    out->struct_size = sizeof(BhpTensor);
    out->dtype = static_cast<int32_t>(t.dtype());
    out->rank = static_cast<uint32_t>(t.rank());
    out->dims = shapes.back().data();
    out->handle = t.buffer() ? t.buffer()->handle() : nullptr;
    out->offset = t.offset();
    out->host_data = t.raw();
    if (t.buffer()) touched.push_back(t.buffer());
  }
  static CallContext& of(void* c) { return *static_cast<CallContext*>(c); }
  static Shape shape(uint32_t rank, const int64_t* dims) { return dims ? Shape(dims, dims + rank) : Shape(rank, 0); }

  static BhpStatus* allocate_output(void* c, uint32_t index, int32_t dtype, uint32_t rank, const int64_t* dims,
                                    BhpTensor* out) {
    auto& cc = of(c);
    if (!out || out->struct_size < sizeof(BhpTensor))
      return make_status(nullptr, BH_INVALID_ARGUMENT, "allocate_output: out is NULL or smaller than ABI 1's BhpTensor");
    auto t = cc.ctx->allocate_output(static_cast<int>(index), static_cast<DataType>(dtype), shape(rank, dims));
    if (!t.is_ok()) return new BhpStatus{t.status()};
    auto h = cc.device->handle_of(*t, "output " + std::to_string(index));
    if (!h.is_ok()) return new BhpStatus{h.status()};
    cc.fill(*t, out);
    return nullptr;
  }
  static BhpStatus* alias_output(void* c, uint32_t index, uint32_t input, uint32_t rank, const int64_t* dims) {
    auto& cc = of(c);
    const Tensor* in = cc.ctx->input(static_cast<int>(input));
    if (!in) return make_status(nullptr, BH_INVALID_ARGUMENT, ("alias_output: input " + std::to_string(input) + " is no tensor").c_str());
    Shape s = shape(rank, dims);
    int64_t n = 0;
    if (!checked_numel(s, &n) || n != in->numel())
      return make_status(nullptr, BH_INVALID_ARGUMENT,
                         ("alias_output: shape " + shape_to_string(s) + " does not hold the " + std::to_string(in->numel()) +
                          " elements of input " + std::to_string(input))
                             .c_str());
    Status st = cc.ctx->set_output(static_cast<int>(index), Value(in->reshaped(std::move(s))));
    return st.is_ok() ? nullptr : new BhpStatus{st};
  }
  static BhpStatus* allocate_scratch(void* c, uint64_t bytes, BhpTensor* out) {
    auto& cc = of(c);
    if (!out || out->struct_size < sizeof(BhpTensor))
      return make_status(nullptr, BH_INVALID_ARGUMENT, "allocate_scratch: out is NULL or smaller than ABI 1's BhpTensor");
    auto t = cc.ctx->allocate_scratch(DataType::kUInt8, Shape{static_cast<int64_t>(bytes)});
    if (!t.is_ok()) return new BhpStatus{t.status()};
    cc.fill(*t, out);
    return nullptr;
  }
};

class PluginKernel final : public Kernel {
 public:
  PluginKernel(std::shared_ptr<PluginDevice> device, BhpKernel* kernel) : device_(std::move(device)), kernel_(kernel) {}
  ~PluginKernel() override { device_->table().destroy_kernel(kernel_); }

  Status compute(KernelContext& ctx) const override {
    auto* rs = static_cast<RunState*>(ctx.device_run_state());
    if (rs && !rs->error.is_ok()) return rs->error;
    CallContext cc{&ctx, device_.get(), rs, {}, {}};
    std::vector<BhpTensor> ins(ctx.num_inputs());
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ins[i] = BhpTensor{};
      ins[i].struct_size = sizeof(BhpTensor);
      const Tensor* t = ctx.input(i);
      if (!t && ctx.has_input(i)) return invalid_argument(ctx.where() + "input " + std::to_string(i) + " is not a tensor");
      if (!t) continue;
      BH_RETURN_IF_ERROR(device_->handle_of(*t, ctx.where() + "input " + std::to_string(i)).status());
      cc.fill(*t, &ins[i]);
    }
    std::vector<uint8_t> wanted(ctx.num_outputs());
    for (int o = 0; o < ctx.num_outputs(); ++o) wanted[o] = ctx.output_wanted(o) ? 1 : 0;
    BhpKernelCall call{};
    call.struct_size = sizeof call;
    call.run = rs ? rs->run : nullptr;
    call.num_inputs = static_cast<uint32_t>(ins.size());
    call.inputs = ins.data();
    call.num_outputs = static_cast<uint32_t>(wanted.size());
    call.output_wanted = wanted.data();
    call.context = &cc;
    call.allocate_output = CallContext::allocate_output;
    call.alias_output = CallContext::alias_output;
    call.allocate_scratch = CallContext::allocate_scratch;
    Status s = take(device_->table().compute(kernel_, &call), device_->where());
    if (rs) {
      rs->failed = rs->failed || !s.is_ok();
      for (auto& b : cc.touched) rs->in_flight.push_back(std::move(b));
    }
    return s;
  }

 private:
  std::shared_ptr<PluginDevice> device_;
  BhpKernel* kernel_;
};

// A node described for create_kernel; every pointer stays valid while it lives.
struct NodeView {
  BhpNode node{};
  std::vector<BhpValueInfo> inputs, outputs;
  std::vector<BhpAttribute> attrs;
  std::deque<std::vector<int64_t>> dims;
  std::deque<std::vector<const char*>> strings;

  NodeView(const KernelInfo& info) {
    const ir::Node& n = info.node;
    auto describe = [&](const std::string& name, DataType known) {
      BhpValueInfo v{};
      v.struct_size = sizeof v;
      v.present = !name.empty();
      v.dtype = static_cast<int32_t>(known);
      v.rank = -1;
      const ir::ValueInfo* vi = info.graph && !name.empty() ? info.graph->info(name) : nullptr;
      if (vi && v.dtype == BH_TYPE_UNDEFINED) v.dtype = static_cast<int32_t>(vi->dtype);
      if (vi && vi->shape) {
        auto& d = dims.emplace_back();
        for (const auto& x : *vi->shape) d.push_back(x.value);
        v.rank = static_cast<int32_t>(d.size());
        v.dims = d.data();
      }
      return v;
    };
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      BhpValueInfo v = describe(n.inputs[i], i < info.input_types.size() ? info.input_types[i] : DataType::kUndefined);
      if (info.input_is_constant(i)) {
        const Tensor& c = info.constant_inputs[i];
        auto& d = dims.emplace_back(c.shape());
        v.dtype = static_cast<int32_t>(c.dtype());
        v.rank = c.rank();
        v.dims = d.data();
        if (c.dtype() != DataType::kString && c.raw()) {
          v.constant_data = c.raw();
          v.constant_size = c.nbytes();
        }
      }
      inputs.push_back(v);
    }
    for (const auto& o : n.outputs) outputs.push_back(describe(o, DataType::kUndefined));
    for (const auto& [name, a] : n.attrs) {
      BhpAttribute b{};
      b.struct_size = sizeof b;
      b.name = name.c_str();
      switch (a.type) {
        case ir::AttrType::kFloat: b.type = BHP_ATTR_FLOAT; b.f = a.f; break;
        case ir::AttrType::kInt: b.type = BHP_ATTR_INT; b.i = a.i; break;
        case ir::AttrType::kString: b.type = BHP_ATTR_STRING; b.s = a.s.c_str(); b.s_size = a.s.size(); break;
        case ir::AttrType::kFloats: b.type = BHP_ATTR_FLOATS; b.floats = a.floats.data(); b.count = a.floats.size(); break;
        case ir::AttrType::kInts: b.type = BHP_ATTR_INTS; b.ints = a.ints.data(); b.count = a.ints.size(); break;
        case ir::AttrType::kStrings: {
          auto& p = strings.emplace_back();
          for (const auto& s : a.strings) p.push_back(s.c_str());
          b.type = BHP_ATTR_STRINGS;
          b.strings = p.data();
          b.count = p.size();
          break;
        }
        default: b.type = BHP_ATTR_OTHER; break;
      }
      attrs.push_back(b);
    }
    node.struct_size = sizeof node;
    node.name = n.name.c_str();
    node.op_type = n.op_type.c_str();
    node.domain = n.domain.c_str();
    node.opset = n.opset;
    node.num_inputs = static_cast<uint32_t>(inputs.size());
    node.inputs = inputs.data();
    node.num_outputs = static_cast<uint32_t>(outputs.size());
    node.outputs = outputs.data();
    node.num_attributes = static_cast<uint32_t>(attrs.size());
    node.attributes = attrs.data();
  }
};

Status PluginDevice::init() {
  const BhpOpInfo* ops = nullptr;
  uint32_t count = 0;
  BH_RETURN_IF_ERROR(take(table().list_ops(device_, &ops, &count), where_ + "listing operators: "));
  if (count && (!ops || ops->struct_size < sizeof(BhpOpInfo)))
    return internal_error(where_ + "list_ops gave no array, or one of elements smaller than ABI 1's BhpOpInfo");
  for (uint32_t i = 0; i < count; ++i) {
    const BhpOpInfo& op = *BHP_AT(BhpOpInfo, ops, i);
    if (!op.op_type) continue;
    // The table lives in this device: the factory is only called while the device is.
    kernels_.add(op.op_type, op.since_version, [this](const KernelInfo& info) { return make_kernel(info); },
                 op.domain ? op.domain : "");
  }
  // I2: the transfers the plugin performs, for this device's domain pairs.
  const Domain host = Domain::host();
  registered_ = true;
  std::string owner = info_.backend + ":" + std::to_string(info_.ordinal);
  router_->add(host, domain_, [this](const Tensor& src, const Tensor& dst) -> Status {
    if (!src.nbytes()) return Status::ok();
    return take(table().write_buffer(device_, dst.buffer()->handle(), dst.offset(), src.raw(), src.nbytes()),
                where_ + "copy to the device: ");
  }, owner);
  router_->add(domain_, host, [this](const Tensor& src, const Tensor& dst) -> Status {
    if (!src.nbytes()) return Status::ok();
    return take(table().read_buffer(device_, src.buffer()->handle(), src.offset(), dst.raw(), src.nbytes()),
                where_ + "copy from the device: ");
  }, owner);
  if (table().copy_buffer)
    router_->add(domain_, domain_, [this](const Tensor& src, const Tensor& dst) -> Status {
      if (!src.nbytes()) return Status::ok();
      return take(table().copy_buffer(device_, src.buffer()->handle(), src.offset(), dst.buffer()->handle(), dst.offset(),
                                      src.nbytes()),
                  where_ + "copy on the device: ");
    }, owner);
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> PluginDevice::make_kernel(const KernelInfo& info) {
  // ABI version 1 exchanges tensors only: a node reading or making a sequence or an
  // optional stays with a device that takes them.
  if (info.graph)
    for (const auto* names : {&info.node.inputs, &info.node.outputs})
      for (const auto& n : *names) {
        const ir::ValueInfo* vi = n.empty() ? nullptr : info.graph->info(n);
        if (vi && vi->type != ir::ValueType::kTensor)
          return unsupported(where_ + info.where() + "value '" + n + "' is not a tensor (a plugin takes tensors only)");
      }
  NodeView view(info);
  BhpKernel* k = nullptr;
  BH_RETURN_IF_ERROR(take(table().create_kernel(device_, &view.node, &k), where_));
  if (!k) return internal_error(where_ + info.where() + "create_kernel returned no kernel");
  return std::unique_ptr<Kernel>(std::make_unique<PluginKernel>(shared_from_this(), k));
}

Result<std::shared_ptr<Allocator>> PluginDevice::open_session(const SessionConfig& config) {
  BhpSessionConfig c{};
  c.struct_size = sizeof c;
  c.owner = config.owner.c_str();
  c.submit_policy = config.submit_policy.c_str();
  c.graph_capture = config.graph_capture ? 1 : 0;
  BhpSession* s = nullptr;
  BH_RETURN_IF_ERROR(take(table().open_session(device_, &c, &s), where_));
  if (!s) return internal_error(where_ + "open_session returned no session");
  return std::shared_ptr<Allocator>(std::make_shared<SessionAllocator>(shared_from_this(), s, config.owner));
}

std::shared_ptr<void> PluginDevice::begin_run(const RunStart& run) {
  auto* alloc = dynamic_cast<SessionAllocator*>(run.session_allocator);
  if (!alloc) return nullptr;
  auto rs = std::make_shared<RunState>();
  rs->session = std::static_pointer_cast<SessionAllocator>(alloc->shared_from_this());
  BhpRunInfo ri{};
  ri.struct_size = sizeof ri;
  ri.num_nodes = run.nodes ? static_cast<uint32_t>(run.nodes->size()) : 0;
  ri.capturable = run.capturable ? 1 : 0;
  rs->error = take(table().begin_run(alloc->raw(), &ri, &rs->run), where_ + "beginning a run: ");
  if (!rs->error.is_ok()) rs->run = nullptr;
  return rs;
}

Result<std::shared_ptr<Device>> PluginBackend::open_device(int ordinal, std::shared_ptr<CopyRouter> router) {
  int32_t n = 0;
  BH_RETURN_IF_ERROR(take(table().device_count(backend_, &n), name() + ": "));
  if (ordinal < 0 || ordinal >= n)
    return not_found(name() + ":" + std::to_string(ordinal) + " does not exist (" + std::to_string(n) + " " + name() +
                     " device(s) found)");
  MemoryKind kind = MemoryKind::kDeviceLocal;
  BH_ASSIGN_OR_RETURN(DeviceInfo info, describe(ordinal, &kind));
  BhpDevice* d = nullptr;
  BH_RETURN_IF_ERROR(take(table().open_device(backend_, ordinal, &d), name() + ":" + std::to_string(ordinal) + ": "));
  if (!d) return internal_error(name() + ": open_device returned no device");
  // From here the device owns `d`: a failure below closes it through ~PluginDevice.
  auto dev = std::make_shared<PluginDevice>(shared_from_this(), d, std::move(info), kind, std::move(router));
  BH_RETURN_IF_ERROR(dev->init());
  return std::shared_ptr<Device>(std::move(dev));
}

// The members version 1 requires (the optional ones may be NULL).
Status check_table(const BhpPluginV1& t, const std::string& what) {
  if (t.struct_size < sizeof(BhpPluginV1))
    return invalid_argument(what + ": its version-1 table is " + std::to_string(t.struct_size) + " bytes, fewer than the " +
                            std::to_string(sizeof(BhpPluginV1)) + " version 1 has");
  const std::pair<const char*, const void*> required[] = {
      {"create_backend", reinterpret_cast<const void*>(t.create_backend)},
      {"destroy_backend", reinterpret_cast<const void*>(t.destroy_backend)},
      {"device_count", reinterpret_cast<const void*>(t.device_count)},
      {"describe_device", reinterpret_cast<const void*>(t.describe_device)},
      {"open_device", reinterpret_cast<const void*>(t.open_device)},
      {"close_device", reinterpret_cast<const void*>(t.close_device)},
      {"list_ops", reinterpret_cast<const void*>(t.list_ops)},
      {"allocate", reinterpret_cast<const void*>(t.allocate)},
      {"free_buffer", reinterpret_cast<const void*>(t.free_buffer)},
      {"write_buffer", reinterpret_cast<const void*>(t.write_buffer)},
      {"read_buffer", reinterpret_cast<const void*>(t.read_buffer)},
      {"create_kernel", reinterpret_cast<const void*>(t.create_kernel)},
      {"destroy_kernel", reinterpret_cast<const void*>(t.destroy_kernel)},
      {"compute", reinterpret_cast<const void*>(t.compute)},
      {"open_session", reinterpret_cast<const void*>(t.open_session)},
      {"close_session", reinterpret_cast<const void*>(t.close_session)},
      {"begin_run", reinterpret_cast<const void*>(t.begin_run)},
      {"flush", reinterpret_cast<const void*>(t.flush)},
      {"end_run", reinterpret_cast<const void*>(t.end_run)}};
  for (auto& [name, fn] : required)
    if (!fn) return invalid_argument(what + ": its table has no '" + name + "', which ABI version 1 requires");
  if (!t.name || !*t.name) return invalid_argument(what + ": its table names no backend");
  for (const char* c = t.name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-') || c - t.name >= 32)
      return invalid_argument(what + ": backend name '" + std::string(t.name).substr(0, 32) +
                              "' is not 1-32 of [a-z0-9_-]");
  return Status::ok();
}

std::string versions_text(const uint32_t* v, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

bool is_plugin(const Backend& backend) { return dynamic_cast<const PluginBackend*>(&backend) != nullptr; }

bool is_plugin_device(const Device& device) { return dynamic_cast<const PluginDevice*>(&device) != nullptr; }

bool counters(const Device& device, Counters* out) {
  auto* d = dynamic_cast<const PluginDevice*>(&device);
  if (!d || !d->table().counters) return false;
  BhpCounters c{};
  c.struct_size = sizeof c;
  if (!take(d->table().counters(d->raw(), &c), "").is_ok()) return false;
  *out = Counters{c.submits, c.run_submits, c.dispatches, c.replays, c.memory_bytes};
  return true;
}

Result<std::shared_ptr<Backend>> load(const LoadRequest& request) {
  auto lib = std::make_shared<Library>();
  EntryFn entry = request.entry;
  std::string what;
  if (entry) {
    lib->path = request.label.empty() ? "host-given backend" : request.label;
    what = "backend library '" + lib->path + "'";
  } else {
    lib->path = request.path;
    what = "backend library '" + request.path + "'";
    if (request.path.empty()) return invalid_argument("load_backend: empty library path");
    if (request.path.find('/') == std::string::npos)
      return invalid_argument(what + ": give a path (with a '/'), not a name the system's library search would resolve");
    dlerror();
    lib->handle = dlopen(request.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
      const char* e = dlerror();
      return not_found(what + ": cannot be loaded: " + std::string(e ? e : "unknown error"));
    }
    entry = reinterpret_cast<EntryFn>(dlsym(lib->handle, BHP_ENTRY_NAME));
    if (!entry) return invalid_argument(what + " exports no " + BHP_ENTRY_NAME + "; is it a bulkhead backend plugin?");
  }
  uint32_t chosen = 0;
  const void* table = nullptr;
  const size_t nv = sizeof kHostAbiVersions / sizeof kHostAbiVersions[0];
  int32_t rc = entry(kHostAbiVersions, static_cast<uint32_t>(nv), &chosen, &table);
  bool spoken = false;
  for (uint32_t v : kHostAbiVersions) spoken = spoken || v == chosen;
  if (rc != 0 || !table || !spoken)
    return unsupported(what + " speaks backend plugin ABI version " + std::to_string(chosen) +
                       "; this bulkhead speaks version " + versions_text(kHostAbiVersions, nv));
  lib->table = static_cast<const BhpPluginV1*>(table);
  lib->abi = chosen;
  BH_RETURN_IF_ERROR(check_table(*lib->table, what));
  if (!request.expect_name.empty() && request.expect_name != lib->table->name)
    return invalid_argument(what + " names its backend '" + lib->table->name + "', not '" + request.expect_name +
                            "' as its file name says");
  BackendOrigin origin;
  origin.library = lib->path;
  origin.abi_version = chosen;
  origin.registered_by = request.registered_by.empty() ? (request.entry ? "host" : "Env::load_backend") : request.registered_by;
  origin.version = lib->table->version ? lib->table->version : "";
  auto backend = std::make_shared<PluginBackend>(std::move(lib), std::move(origin));
  BH_RETURN_IF_ERROR(backend->create(request.options).with_context(what + ": "));
  return std::shared_ptr<Backend>(std::move(backend));
}

}  // namespace bulkhead::plugin
