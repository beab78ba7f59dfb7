// Drives the OpenCL backend plugin through its C ABI alone, as a host would, with this
// test as the host (its make_status/log and its BhpKernelCall callbacks): entry
// negotiation, options, enumeration, devices, sessions, memory and transfers at offsets,
// kernels of each family against reference loops written here, the submission policies'
// submit counts, failure injection at every step, and teardown in the ABI's order.
//
//   opencl_direct_test <path/to/libbulkhead_opencl.so>
//
// Exits non-zero with one line "FAIL <case>: <what>" on the first mismatch; exits 0
// (skipping the device cases, with a note) when the machine has no OpenCL device.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bulkhead/backend_plugin.h"

// The host's status object: this test is the host.
struct BhpStatus {
  int32_t code;
  std::string message;
};

namespace {

std::string g_case = "setup";
bool g_started = false;

// Starts case `name`, reporting the one before it as passed.
void begin(const std::string& name) {
  if (g_started) std::printf("ok    %s\n", g_case.c_str());
  g_started = true;
  g_case = name;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL  %s: %s\n", g_case.c_str(), what.c_str());
  std::exit(1);
}

void expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

BhpStatus* make_status(void*, int32_t code, const char* message) { return new BhpStatus{code, message ? message : ""}; }
void log_line(void*, int32_t level, const char* message) {
  std::fprintf(stderr, "  plugin log (%d): %s\n", level, message);
}

// A returned status, taken over: code 0 for success.
struct Outcome {
  int32_t code = 0;
  std::string message;
};
Outcome take(BhpStatus* s) {
  if (!s) return {};
  Outcome o{s->code, s->message};
  delete s;
  return o;
}
void check(const Outcome& o, const std::string& what) {
  if (o.code) fail(what + " failed (" + std::to_string(o.code) + "): " + o.message);
}
void check(BhpStatus* s, const std::string& what) { check(take(s), what); }
// Expects the call to fail with `code` and a message containing `needle`.
void expect_error(BhpStatus* s, int32_t code, const std::string& needle, const std::string& what) {
  Outcome o = take(s);
  if (o.code != code || o.message.find(needle) == std::string::npos)
    fail(what + ": expected error " + std::to_string(code) + " containing '" + needle + "', got " +
         std::to_string(o.code) + " '" + o.message + "'");
}

using Dims = std::vector<int64_t>;
int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}
std::string dims_text(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Deterministic data in [-1, 1).
std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  if (got.size() != want.size())
    fail(what + ": " + std::to_string(got.size()) + " values, expected " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-3 * std::fabs(want[i])))
      fail(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
           std::to_string(want[i]));
}

// A host tensor: type, shape and bytes.
struct HostTensor {
  int32_t dtype = BH_TYPE_FLOAT32;
  Dims dims;
  std::vector<unsigned char> bytes;

  template <class T>
  static HostTensor of(int32_t dtype, Dims dims, const std::vector<T>& v) {
    HostTensor t{dtype, std::move(dims), {}};
    t.bytes.resize(v.size() * sizeof(T));
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  }
  static HostTensor f32(Dims dims, const std::vector<float>& v) { return of(BH_TYPE_FLOAT32, std::move(dims), v); }
  static HostTensor i64(Dims dims, const std::vector<int64_t>& v) { return of(BH_TYPE_INT64, std::move(dims), v); }
  std::vector<float> floats() const {
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

size_t dtype_size(int32_t t) {
  switch (t) {
    case BH_TYPE_INT64:
    case BH_TYPE_FLOAT64:
      return 8;
    case BH_TYPE_UINT8:
    case BH_TYPE_INT8:
    case BH_TYPE_BOOL:
      return 1;
    case BH_TYPE_INT16:
    case BH_TYPE_UINT16:
    case BH_TYPE_FLOAT16:
      return 2;
    default:
      return 4;
  }
}

// A node for create_kernel, owning what its BhpNode points at.
struct NodeSpec {
  struct Attr {
    std::string name;
    int32_t type = BHP_ATTR_UNDEFINED;
    int64_t i = 0;
    float f = 0;
    std::string s;
    Dims ints;
    std::vector<float> floats;
    std::vector<std::string> strings;
  };
  struct Input {
    bool present = true;
    HostTensor value;  // its type and shape; its bytes when constant
    bool constant = false;
  };
  std::string name, op;
  int opset = 17;
  std::vector<Input> inputs;
  uint32_t outputs = 1;
  std::vector<Attr> attrs;

  NodeSpec(std::string n, std::string o, int set = 17) : name(std::move(n)), op(std::move(o)), opset(set) {}
  NodeSpec& in(const HostTensor& t, bool constant = false) {
    inputs.push_back({true, t, constant});
    return *this;
  }
  NodeSpec& absent() {
    inputs.push_back({false, {}, false});
    return *this;
  }
  NodeSpec& attr_i(const char* n, int64_t v) {
    attrs.push_back({n, BHP_ATTR_INT, v});
    return *this;
  }
  NodeSpec& attr_f(const char* n, float v) {
    Attr a{n, BHP_ATTR_FLOAT};
    a.f = v;
    attrs.push_back(a);
    return *this;
  }
  NodeSpec& attr_s(const char* n, const std::string& v) {
    Attr a{n, BHP_ATTR_STRING};
    a.s = v;
    attrs.push_back(a);
    return *this;
  }
  NodeSpec& attr_ints(const char* n, Dims v) {
    Attr a{n, BHP_ATTR_INTS};
    a.ints = std::move(v);
    attrs.push_back(a);
    return *this;
  }
  NodeSpec& attr_floats(const char* n, std::vector<float> v) {
    Attr a{n, BHP_ATTR_FLOATS};
    a.floats = std::move(v);
    attrs.push_back(a);
    return *this;
  }
  NodeSpec& attr_strings(const char* n, std::vector<std::string> v) {
    Attr a{n, BHP_ATTR_STRINGS};
    a.strings = std::move(v);
    attrs.push_back(a);
    return *this;
  }
};

// The BhpNode of a NodeSpec, valid while both live.
struct NodeView {
  BhpNode node{};
  std::vector<BhpValueInfo> inputs, outputs;
  std::vector<BhpAttribute> attrs;
  std::deque<std::vector<const char*>> strings;

  explicit NodeView(const NodeSpec& s) {
    for (const auto& i : s.inputs) {
      BhpValueInfo v{};
      v.struct_size = sizeof v;
      v.present = i.present;
      v.dtype = i.present ? i.value.dtype : BH_TYPE_UNDEFINED;
      v.rank = i.present ? static_cast<int32_t>(i.value.dims.size()) : -1;
      v.dims = i.value.dims.data();
      if (i.constant) {
        v.constant_data = i.value.bytes.data();
        v.constant_size = i.value.bytes.size();
      }
      inputs.push_back(v);
    }
    for (uint32_t o = 0; o < s.outputs; ++o) {
      BhpValueInfo v{};
      v.struct_size = sizeof v;
      v.present = 1;
      v.rank = -1;
      outputs.push_back(v);
    }
    for (const auto& a : s.attrs) {
      BhpAttribute b{};
      b.struct_size = sizeof b;
      b.name = a.name.c_str();
      b.type = a.type;
      b.i = a.i;
      b.f = a.f;
      b.s = a.s.c_str();
      b.s_size = a.s.size();
      b.ints = a.ints.data();
      b.floats = a.floats.data();
      b.count = a.type == BHP_ATTR_INTS     ? a.ints.size()
                : a.type == BHP_ATTR_FLOATS ? a.floats.size()
                                            : a.strings.size();
      auto& p = strings.emplace_back();
      for (const auto& str : a.strings) p.push_back(str.c_str());
      b.strings = p.data();
      attrs.push_back(b);
    }
    node.struct_size = sizeof node;
    node.name = s.name.c_str();
    node.op_type = s.op.c_str();
    node.domain = "";
    node.opset = s.opset;
    node.num_inputs = static_cast<uint32_t>(inputs.size());
    node.inputs = inputs.data();
    node.num_outputs = static_cast<uint32_t>(outputs.size());
    node.outputs = outputs.data();
    node.num_attributes = static_cast<uint32_t>(attrs.size());
    node.attributes = attrs.data();
  }
};

// A plugin buffer of the test's, holding a tensor at `offset`.
struct DeviceTensor {
  int32_t dtype = BH_TYPE_UNDEFINED;
  Dims dims;
  void* handle = nullptr;
  uint64_t offset = 0;
};

struct Plugin {
  void* lib = nullptr;
  BhpEntryFn entry = nullptr;
  const BhpPluginV1* t = nullptr;
  BhpHost host{};
};

// One backend, device and session of the plugin, and the helpers that drive kernels.
class Harness {
 public:
  Harness(const Plugin& p, const std::string& options, const char* policy = "") : p_(p) {
    check(t().create_backend(&p_.host, options.c_str(), &backend_), "create_backend");
    check(t().open_device(backend_, 0, &device_), "open_device");
    BhpSessionConfig c{sizeof c, "direct-test", policy, 1};
    check(t().open_session(device_, &c, &session_), "open_session");
  }
  ~Harness() {  // the ABI's order: sessions, then the device, then the backend
    t().close_session(session_);
    t().close_device(device_);
    t().destroy_backend(backend_);
  }
  const BhpPluginV1& t() const { return *p_.t; }
  BhpDevice* device() const { return device_; }
  BhpSession* session() const { return session_; }

  BhpCounters counters() const {
    BhpCounters c{};
    c.struct_size = sizeof c;
    check(t().counters(device_, &c), "counters");
    return c;
  }

  // A device copy of `h` placed at a non-zero offset of its buffer.
  DeviceTensor upload(const HostTensor& h, uint64_t offset = 256) {
    DeviceTensor d{h.dtype, h.dims, nullptr, offset};
    BhpBuffer b{sizeof b};
    check(t().allocate(device_, session_, offset + h.bytes.size(), &b), "allocate");
    keep(b.handle);
    d.handle = b.handle;
    check(t().write_buffer(device_, b.handle, offset, h.bytes.data(), h.bytes.size()), "write_buffer");
    return d;
  }
  HostTensor download(const DeviceTensor& d) {
    HostTensor h{d.dtype, d.dims, std::vector<unsigned char>(numel(d.dims) * dtype_size(d.dtype))};
    check(t().read_buffer(device_, d.handle, d.offset, h.bytes.data(), h.bytes.size()), "read_buffer");
    return h;
  }
  void free_all() {
    std::lock_guard lock(mu_);
    for (void* b : buffers_) t().free_buffer(device_, session_, b);
    buffers_.clear();
  }
  // Frees `handle` with the others at free_all (thread-safe: runs may overlap).
  void keep(void* handle) {
    std::lock_guard lock(mu_);
    buffers_.push_back(handle);
  }

  BhpKernel* kernel(const NodeSpec& spec) {
    NodeView v(spec);
    BhpKernel* k = nullptr;
    check(t().create_kernel(device_, &v.node, &k), "create_kernel " + spec.op);
    return k;
  }
  Outcome try_kernel(const NodeSpec& spec, BhpKernel** k) {
    NodeView v(spec);
    return take(t().create_kernel(device_, &v.node, k));
  }

  // One compute of `k` in `run` (NULL: outside a run) over `ins`; the outputs it made.
  Outcome compute(BhpKernel* k, BhpRun* run, const std::vector<DeviceTensor>& ins, std::vector<DeviceTensor>* outs,
                  uint32_t num_outputs = 1) {
    struct Ctx {
      Harness* h;
      const std::vector<DeviceTensor>* ins;
      std::vector<DeviceTensor> outs;
      std::deque<Dims> dims;
    } ctx{this, &ins, std::vector<DeviceTensor>(num_outputs), {}};
    std::vector<BhpTensor> bt(ins.size());
    for (size_t i = 0; i < ins.size(); ++i)
      bt[i] = BhpTensor{sizeof(BhpTensor), ins[i].dtype,       static_cast<uint32_t>(ins[i].dims.size()),
                        ins[i].dims.data(), ins[i].handle,
                        ins[i].offset,      nullptr};
    std::vector<uint8_t> wanted(num_outputs, 1);
    BhpKernelCall call{};
    call.struct_size = sizeof call;
    call.run = run;
    call.num_inputs = static_cast<uint32_t>(bt.size());
    call.inputs = bt.data();
    call.num_outputs = num_outputs;
    call.output_wanted = wanted.data();
    call.context = &ctx;
    call.allocate_output = [](void* c, uint32_t index, int32_t dtype, uint32_t rank, const int64_t* dims,
                              BhpTensor* out) -> BhpStatus* {
      auto& x = *static_cast<Ctx*>(c);
      if (index >= x.outs.size()) return make_status(nullptr, BH_INVALID_ARGUMENT, "no such output");
      Dims d(dims, dims + rank);
      BhpBuffer b{sizeof b};
      // Outputs too land at an offset, so that kernels must honour it.
      if (BhpStatus* s = x.h->t().allocate(x.h->device_, x.h->session_, 128 + numel(d) * dtype_size(dtype), &b))
        return s;
      x.h->keep(b.handle);
      x.outs[index] = DeviceTensor{dtype, d, b.handle, 128};
      const Dims& kept = x.dims.emplace_back(d);
      *out = BhpTensor{sizeof(BhpTensor), dtype, rank, kept.data(), b.handle, 128, nullptr};
      return nullptr;
    };
    call.alias_output = [](void* c, uint32_t index, uint32_t input, uint32_t rank, const int64_t* dims) -> BhpStatus* {
      auto& x = *static_cast<Ctx*>(c);
      const DeviceTensor& in = (*x.ins)[input];
      Dims d(dims, dims + rank);
      if (numel(d) != numel(in.dims)) return make_status(nullptr, BH_INVALID_ARGUMENT, "alias of another size");
      x.outs[index] = DeviceTensor{in.dtype, d, in.handle, in.offset};
      return nullptr;
    };
    call.allocate_scratch = [](void* c, uint64_t bytes, BhpTensor* out) -> BhpStatus* {
      auto& x = *static_cast<Ctx*>(c);
      BhpBuffer b{sizeof b};
      if (BhpStatus* s = x.h->t().allocate(x.h->device_, x.h->session_, 64 + bytes, &b)) return s;
      x.h->keep(b.handle);
      const Dims& kept = x.dims.emplace_back(Dims{static_cast<int64_t>(bytes)});
      *out = BhpTensor{sizeof(BhpTensor), BH_TYPE_UINT8, 1, kept.data(), b.handle, 64, nullptr};
      return nullptr;
    };
    Outcome o = take(t().compute(k, &call));
    *outs = std::move(ctx.outs);
    return o;
  }

  BhpRun* begin_run() {
    BhpRunInfo info{sizeof info, 1, 1};
    BhpRun* r = nullptr;
    check(t().begin_run(session_, &info, &r), "begin_run");
    return r;
  }

  // Runs `spec` once in a run over `ins` (uploaded at offsets); its outputs, read back.
  std::vector<HostTensor> eval(const NodeSpec& spec, uint32_t num_outputs = 1) {
    std::vector<DeviceTensor> ins;
    for (const auto& i : spec.inputs) ins.push_back(i.present ? upload(i.value) : DeviceTensor{});
    BhpKernel* k = kernel(spec);
    BhpRun* run = begin_run();
    std::vector<DeviceTensor> outs;
    Outcome o = compute(k, run, ins, &outs, num_outputs);
    if (o.code) fail(spec.op + " compute failed: " + o.message);
    check(t().flush(run), "flush");
    t().end_run(run, 1);
    std::vector<HostTensor> r;
    for (const auto& d : outs) r.push_back(download(d));
    t().destroy_kernel(k);
    free_all();
    return r;
  }

 private:
  const Plugin& p_;
  BhpBackend* backend_ = nullptr;
  BhpDevice* device_ = nullptr;
  BhpSession* session_ = nullptr;
  std::mutex mu_;
  std::vector<void*> buffers_;  // guarded by mu_
};

// ---------------------------------------------------------------------------------------
// Reference loops

// NCHW convolution, 2-D, with groups, pads (begin h, w; end h, w), strides and dilations.
std::vector<float> ref_conv(const std::vector<float>& x, const Dims& xd, const std::vector<float>& w, const Dims& wd,
                            const std::vector<float>& b, int group, Dims pads, Dims strides, Dims dil, Dims* yd) {
  const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], M = wd[0], KH = wd[2], KW = wd[3];
  const int64_t OH = (H + pads[0] + pads[2] - (dil[0] * (KH - 1) + 1)) / strides[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - (dil[1] * (KW - 1) + 1)) / strides[1] + 1;
  *yd = {N, M, OH, OW};
  const int64_t cg = C / group, mg = M / group;
  std::vector<float> y(N * M * OH * OW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b.empty() ? 0 : b[m];
          const int64_t g = m / mg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * strides[0] - pads[0] + kh * dil[0],
                              iw = ow * strides[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[((n * C + g * cg + c) * H + ih) * W + iw] * w[((m * cg + c) * KH + kh) * KW + kw];
              }
          y[((n * M + m) * OH + oh) * OW + ow] = static_cast<float>(acc);
        }
  return y;
}

// ---------------------------------------------------------------------------------------
// Cases

void entry_negotiation(const Plugin& p) {
  begin("entry negotiation");
  const uint32_t only99[] = {99};
  uint32_t chosen = 0;
  const void* table = &chosen;  // a sentinel: a refusing entry leaves it alone
  expect(p.entry(only99, 1, &chosen, &table) != 0, "a host speaking only version 99 was accepted");
  expect(chosen == 1, "a refusing entry must name its newest version 1, named " + std::to_string(chosen));
  expect(table == &chosen, "a refusing entry wrote the table");
  const uint32_t both[] = {99, 1};
  chosen = 0;
  table = nullptr;
  expect(p.entry(both, 2, &chosen, &table) == 0 && chosen == 1 && table, "version 1 among {99, 1} was refused");
  const auto* t = static_cast<const BhpPluginV1*>(table);
  expect(t == p.t, "the entry returned another table on a second call");
  expect(t->struct_size == sizeof(BhpPluginV1) && t->abi_version == 1 && std::string(t->name) == "opencl",
         "the table's header is wrong");
  expect(t->copy_buffer && t->counters, "the optional copy_buffer and counters are missing");
}

void bad_options(const Plugin& p) {
  begin("bad options");
  BhpBackend* b = nullptr;
  expect_error(p.t->create_backend(&p.host, "bogus=1", &b), BH_INVALID_ARGUMENT, "bogus", "unknown key");
  expect_error(p.t->create_backend(&p.host, "policy=fast", &b), BH_INVALID_ARGUMENT, "fast", "unknown policy");
  expect_error(p.t->create_backend(&p.host, "fail_at=nowhere", &b), BH_INVALID_ARGUMENT, "nowhere", "unknown step");
  expect_error(p.t->create_backend(&p.host, "policy", &b), BH_INVALID_ARGUMENT, "key=value", "no value");
  expect(b == nullptr, "a failed create_backend wrote its out-parameter");
  check(p.t->create_backend(&p.host, " policy = auto:8M , ", &b), "create_backend with spaces and a trailing comma");
  p.t->destroy_backend(b);
}

// The number of devices (0: the device cases are skipped).
int32_t enumerate(const Plugin& p) {
  begin("enumerate");
  BhpBackend* b = nullptr;
  check(p.t->create_backend(&p.host, "policy=split", &b), "create_backend");
  int32_t n = -1;
  check(p.t->device_count(b, &n), "device_count");
  expect(n >= 0, "negative device count");
  for (int32_t i = 0; i < n; ++i) {
    BhpDeviceInfo info{sizeof info};
    check(p.t->describe_device(b, i, &info), "describe_device");
    expect(info.name && *info.name && info.driver && *info.driver && info.detail && *info.detail,
           "a device description is empty");
    expect(std::string(info.submit_policy).find("split") == 0,
           std::string("the policy option is not the default: ") + info.submit_policy);
    expect(info.memory_kind == BH_MEMORY_DEVICE_LOCAL, "memory is not device-local");
    std::printf("  device %d: %s | %s | %s | %s\n", i, info.name, info.driver, info.submit_policy, info.detail);
  }
  BhpDeviceInfo info{sizeof info};
  expect_error(p.t->describe_device(b, n, &info), BH_NOT_FOUND, "does not exist", "describe past the last device");
  p.t->destroy_backend(b);
  return n;
}

void memory(const Plugin& p) {
  begin("memory and transfers");
  Harness h(p, "");
  const BhpPluginV1& t = h.t();
  const uint64_t before = h.counters().memory_bytes;
  BhpBuffer z1{sizeof z1}, z2{sizeof z2}, a{sizeof a}, b{sizeof b};
  check(t.allocate(h.device(), h.session(), 0, &z1), "allocate 0");
  check(t.allocate(h.device(), nullptr, 0, &z2), "allocate 0 for the device");
  expect(z1.handle && z2.handle && z1.handle != z2.handle && !z1.host_data, "0-byte buffers are not distinct handles");
  check(t.allocate(h.device(), h.session(), 1000, &a), "allocate");
  check(t.allocate(h.device(), h.session(), 1000, &b), "allocate");
  expect(h.counters().memory_bytes >= before + 2000, "memory_bytes does not count the buffers");
  std::vector<unsigned char> src(300), back(300), zeros(1000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  check(t.write_buffer(h.device(), a.handle, 0, zeros.data(), zeros.size()), "write zeros");
  check(t.write_buffer(h.device(), a.handle, 101, src.data(), src.size()), "write at 101");
  check(t.read_buffer(h.device(), a.handle, 101, back.data(), back.size()), "read at 101");
  expect(back == src, "the bytes read back at offset 101 differ");
  check(t.copy_buffer(h.device(), a.handle, 101, b.handle, 517, src.size()), "copy 101 -> 517");
  check(t.read_buffer(h.device(), b.handle, 517, back.data(), back.size()), "read at 517");
  expect(back == src, "the bytes copied to offset 517 differ");
  unsigned char edge = 0;
  check(t.read_buffer(h.device(), a.handle, 100, &edge, 1), "read at 100");
  expect(edge == 0, "the write spilled before its offset");
  expect_error(t.write_buffer(h.device(), a.handle, 900, src.data(), src.size()), BH_INVALID_ARGUMENT, "overrun",
               "a write past the end");
  expect_error(t.read_buffer(h.device(), a.handle, 1001, back.data(), 1), BH_INVALID_ARGUMENT, "overrun",
               "a read past the end");
  for (BhpBuffer* x : {&z1, &a, &b}) t.free_buffer(h.device(), h.session(), x->handle);
  t.free_buffer(h.device(), nullptr, z2.handle);
  expect(h.counters().memory_bytes == before, "memory_bytes did not return to its value after freeing");
}

void conv(Harness& h) {
  begin("Conv (implicit GEMM, fused relu)");
  // 32 output channels per group: the implicit GEMM; pads, strides, dilations, bias.
  const Dims xd{2, 6, 9, 11}, wd{32, 6, 3, 3};
  const auto x = random_floats(numel(xd), 1), w = random_floats(numel(wd), 2), b = random_floats(32, 3);
  Dims yd;
  auto want = ref_conv(x, xd, w, wd, b, 1, {1, 2, 0, 1}, {2, 1}, {1, 2}, &yd);
  for (float& v : want) v = std::max(v, 0.f);
  NodeSpec s("conv_gemm", "Conv");
  s.in(HostTensor::f32(xd, x)).in(HostTensor::f32(wd, w), true).in(HostTensor::f32({32}, b), true);
  s.attr_ints("pads", {1, 2, 0, 1}).attr_ints("strides", {2, 1}).attr_ints("dilations", {1, 2});
  s.attr_strings("_post_ops", {"relu"}).attr_floats("_post_args", {0, 0});
  auto y = h.eval(s);
  expect(y[0].dims == yd, "output shape " + dims_text(y[0].dims) + ", expected " + dims_text(yd));
  expect_close(y[0].floats(), want, "Conv");

  begin("Conv (depthwise, fused sum and clip)");
  const Dims dxd{1, 4, 7, 7}, dwd{4, 1, 3, 3};
  const auto dx = random_floats(numel(dxd), 4), dw = random_floats(numel(dwd), 5);
  auto dwant = ref_conv(dx, dxd, dw, dwd, {}, 4, {1, 1, 1, 1}, {1, 1}, {1, 1}, &yd);
  const auto summand = random_floats(dwant.size(), 6);
  for (size_t i = 0; i < dwant.size(); ++i) dwant[i] = std::clamp(dwant[i] + summand[i], -0.5f, 0.5f);
  NodeSpec d("conv_dw", "Conv");
  d.in(HostTensor::f32(dxd, dx)).in(HostTensor::f32(dwd, dw), true).absent().in(HostTensor::f32(yd, summand));
  d.attr_i("group", 4).attr_ints("pads", {1, 1, 1, 1}).attr_ints("kernel_shape", {3, 3});
  d.attr_strings("_post_ops", {"sum", "clip"}).attr_floats("_post_args", {0, 0, -0.5f, 0.5f});
  expect_close(h.eval(d)[0].floats(), dwant, "depthwise Conv");

  begin("Conv (broadcast summand between post-ops)");
  // linear (2x), then a per-channel summand [1, M, 1, 1], then relu: the summand broadcasts.
  const auto per_channel = random_floats(32, 24);
  Dims gd;
  auto bwant = ref_conv(x, xd, w, wd, b, 1, {1, 2, 0, 1}, {2, 1}, {1, 2}, &gd);
  const int64_t plane = gd[2] * gd[3];
  for (size_t i = 0; i < bwant.size(); ++i) bwant[i] = std::max(2 * bwant[i] + per_channel[(i / plane) % 32], 0.f);
  NodeSpec bs("conv_bsum", "Conv");
  bs.in(HostTensor::f32(xd, x)).in(HostTensor::f32(wd, w), true).in(HostTensor::f32({32}, b), true);
  bs.in(HostTensor::f32({1, 32, 1, 1}, per_channel));
  bs.attr_ints("pads", {1, 2, 0, 1}).attr_ints("strides", {2, 1}).attr_ints("dilations", {1, 2});
  bs.attr_strings("_post_ops", {"linear", "sum", "relu"}).attr_floats("_post_args", {2, 0, 0, 0, 0, 0});
  auto by = h.eval(bs);
  expect(by[0].dims == gd, "output shape " + dims_text(by[0].dims));
  expect_close(by[0].floats(), bwant, "Conv with a broadcast summand");

  begin("Conv (refusals)");
  BhpKernel* k = nullptr;
  NodeSpec bad("conv_mish", "Conv");
  bad.in(HostTensor::f32(xd, x)).in(HostTensor::f32(wd, w), true).attr_strings("_post_ops", {"mish"});
  bad.attr_floats("_post_args", {0, 0});
  Outcome o = h.try_kernel(bad, &k);
  expect(o.code == BH_UNSUPPORTED && o.message.find("mish") != std::string::npos, "an unknown post-op was accepted");
  NodeSpec i64("conv_i64", "Conv");
  i64.in(HostTensor::i64({1, 1, 1, 1}, {1})).in(HostTensor::i64({1, 1, 1, 1}, {1}), true);
  expect(h.try_kernel(i64, &k).code == BH_UNSUPPORTED, "an int64 Conv was accepted");
}

void conv_more(Harness& h) {
  begin("Conv (1-D, auto_pad SAME_UPPER, stride 2)");
  // in 10, kernel 3, stride 2: 5 outputs, one pad at the end; as 2-D with H = 1.
  const auto x = random_floats(3 * 10, 30), w = random_floats(4 * 3 * 3, 31);
  Dims yd;
  const auto want = ref_conv(x, {1, 3, 1, 10}, w, {4, 3, 1, 3}, {}, 1, {0, 0, 0, 1}, {1, 2}, {1, 1}, &yd);
  NodeSpec s("conv1d", "Conv");
  s.in(HostTensor::f32({1, 3, 10}, x)).in(HostTensor::f32({4, 3, 3}, w), true);
  s.attr_s("auto_pad", "SAME_UPPER").attr_ints("strides", {2});
  auto y = h.eval(s)[0];
  expect(y.dims == (Dims{1, 4, 5}), "output shape " + dims_text(y.dims));
  expect_close(y.floats(), want, "1-D Conv");

  begin("ConvTranspose (stride 2, pads, output_padding, group 2)");
  const int64_t C = 4, H = 3, W = 4, G = 2, MG = 3, K = 3, S = 2, P = 1, OP = 1;
  const auto tx = random_floats(C * H * W, 32), tw = random_floats(C * MG * K * K, 33), tb = random_floats(G * MG, 34);
  const int64_t OH = S * (H - 1) + OP + K - 2 * P, OW = S * (W - 1) + OP + K - 2 * P, M = G * MG;
  std::vector<double> acc(M * OH * OW);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ih = 0; ih < H; ++ih)
      for (int64_t iw = 0; iw < W; ++iw)
        for (int64_t m = 0; m < MG; ++m)
          for (int64_t a = 0; a < K; ++a)
            for (int64_t b = 0; b < K; ++b) {
              const int64_t oh = ih * S - P + a, ow = iw * S - P + b, mo = (c / (C / G)) * MG + m;
              if (oh >= 0 && oh < OH && ow >= 0 && ow < OW)
                acc[(mo * OH + oh) * OW + ow] += tx[(c * H + ih) * W + iw] * tw[((c * MG + m) * K + a) * K + b];
            }
  std::vector<float> twant(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) twant[i] = static_cast<float>(acc[i] + tb[i / (OH * OW)]);
  NodeSpec t("deconv", "ConvTranspose");
  t.in(HostTensor::f32({1, C, H, W}, tx))
      .in(HostTensor::f32({C, MG, K, K}, tw), true)
      .in(HostTensor::f32({M}, tb), true);
  t.attr_i("group", G)
      .attr_ints("strides", {S, S})
      .attr_ints("pads", {P, P, P, P})
      .attr_ints("output_padding", {OP, OP});
  auto ty = h.eval(t)[0];
  expect(ty.dims == (Dims{1, M, OH, OW}), "output shape " + dims_text(ty.dims));
  expect_close(ty.floats(), twant, "ConvTranspose");
}

void unary(Harness& h) {
  const auto x = random_floats(300, 35);
  const struct {
    const char* op;
    float (*f)(float);
  } ops[] = {
      {"Relu", [](float v) { return std::max(v, 0.f); }},
      {"LeakyRelu", [](float v) { return v < 0 ? 0.01f * v : v; }},
      {"Sigmoid", [](float v) { return 1 / (1 + std::exp(-v)); }},
      {"Tanh", [](float v) { return std::tanh(v); }},
      {"Exp", [](float v) { return std::exp(v); }},
      {"Log", [](float v) { return std::log(std::fabs(v) + 0.5f); }},
      {"Sqrt", [](float v) { return std::sqrt(std::fabs(v)); }},
      {"Abs", [](float v) { return std::fabs(v); }},
      {"Neg", [](float v) { return -v; }},
      {"HardSigmoid", [](float v) { return std::clamp(0.2f * v + 0.5f, 0.f, 1.f); }},
      {"HardSwish", [](float v) { return v * std::clamp(v / 6 + 0.5f, 0.f, 1.f); }},
      {"Elu", [](float v) { return v < 0 ? std::expm1(v) : v; }},
      {"Selu", [](float v) { return 1.0507010f * (v <= 0 ? 1.6732632f * std::expm1(v) : v); }},
      {"Erf", [](float v) { return std::erf(v); }},
      {"Gelu", [](float v) { return 0.5f * v * (1 + std::erf(v / std::sqrt(2.f))); }},
      {"Softplus", [](float v) { return std::log1p(std::exp(v)); }},
      {"Reciprocal", [](float v) { return 1 / (v + 2); }},
      {"Floor", [](float v) { return std::floor(4 * v); }},
      {"Ceil", [](float v) { return std::ceil(4 * v); }},
  };
  for (const auto& u : ops) {
    begin(std::string("unary ") + u.op);
    // Inputs shifted or scaled where the op's domain or interest asks for it.
    std::vector<float> in = x, want(x.size());
    const std::string op = u.op;
    for (size_t i = 0; i < in.size(); ++i) {
      if (op == "Log") in[i] = std::fabs(x[i]) + 0.5f;
      if (op == "Sqrt") in[i] = std::fabs(x[i]);
      if (op == "Reciprocal") in[i] = x[i] + 2;
      if (op == "Floor" || op == "Ceil") in[i] = 4 * x[i];
      want[i] = u.f(x[i]);
    }
    NodeSpec s(std::string("unary_") + u.op, u.op, 20);
    s.in(HostTensor::f32({3, 100}, in));
    expect_close(h.eval(s)[0].floats(), want, u.op);
  }
  begin("unary Clip (constant min and max inputs)");
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::clamp(x[i], -0.25f, 0.5f);
  NodeSpec c("clip", "Clip", 13);
  c.in(HostTensor::f32({300}, x)).in(HostTensor::f32({}, {-0.25f}), true).in(HostTensor::f32({}, {0.5f}), true);
  expect_close(h.eval(c)[0].floats(), want, "Clip");
  BhpKernel* k = nullptr;
  NodeSpec rc("clip_runtime", "Clip", 13);
  rc.in(HostTensor::f32({300}, x)).in(HostTensor::f32({}, {-0.25f}));
  expect(h.try_kernel(rc, &k).code == BH_UNSUPPORTED, "a Clip with a run-time min was accepted");
}

void reductions(Harness& h) {
  begin("ReduceMean (axes 0 and 2, keepdims 0)");
  const Dims xd{3, 4, 5};
  const auto x = random_floats(numel(xd), 36);
  std::vector<float> want(4);
  for (int j = 0; j < 4; ++j) {
    double s = 0;
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 5; ++k) s += x[(i * 4 + j) * 5 + k];
    want[j] = static_cast<float>(s / 15);
  }
  NodeSpec s("mean", "ReduceMean", 13);
  s.in(HostTensor::f32(xd, x)).attr_ints("axes", {0, -1}).attr_i("keepdims", 0);
  auto y = h.eval(s)[0];
  expect(y.dims == (Dims{4}), "output shape " + dims_text(y.dims));
  expect_close(y.floats(), want, "ReduceMean");

  begin("ReduceMax (opset 18, constant axes, keepdims)");
  std::vector<float> mx(3 * 5, -1e30f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) mx[i * 5 + k] = std::max(mx[i * 5 + k], x[(i * 4 + j) * 5 + k]);
  NodeSpec m("max", "ReduceMax", 18);
  m.in(HostTensor::f32(xd, x)).in(HostTensor::i64({1}, {1}), true);
  auto my = h.eval(m)[0];
  expect(my.dims == (Dims{3, 1, 5}), "output shape " + dims_text(my.dims));
  expect_close(my.floats(), mx, "ReduceMax");

  begin("GlobalAveragePool");
  const Dims gd{2, 3, 10, 13};
  const auto g = random_floats(numel(gd), 37);
  std::vector<float> gw(6);
  for (int p = 0; p < 6; ++p) {
    double sum = 0;
    for (int i = 0; i < 130; ++i) sum += g[p * 130 + i];
    gw[p] = static_cast<float>(sum / 130);
  }
  NodeSpec gp("gap", "GlobalAveragePool");
  gp.in(HostTensor::f32(gd, g));
  auto gy = h.eval(gp)[0];
  expect(gy.dims == (Dims{2, 3, 1, 1}), "output shape " + dims_text(gy.dims));
  expect_close(gy.floats(), gw, "GlobalAveragePool");
}

// (x - mean) / sqrt(var + eps) over rows of n.
std::vector<float> ref_normalize(const std::vector<float>& x, size_t n, float eps) {
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (size_t k = 0; k < n; ++k) mean += x[r * n + k];
    mean /= n;
    for (size_t k = 0; k < n; ++k) var += (x[r * n + k] - mean) * (x[r * n + k] - mean);
    const double inv = 1 / std::sqrt(var / n + eps);
    for (size_t k = 0; k < n; ++k) y[r * n + k] = static_cast<float>((x[r * n + k] - mean) * inv);
  }
  return y;
}

void normalizations(Harness& h) {
  begin("LayerNormalization (axis -1, scale and B)");
  const auto x = random_floats(6 * 100, 38), sc = random_floats(100, 39), b = random_floats(100, 40);
  auto want = ref_normalize(x, 100, 1e-5f);
  for (size_t i = 0; i < want.size(); ++i) want[i] = want[i] * sc[i % 100] + b[i % 100];
  NodeSpec s("ln", "LayerNormalization", 17);
  s.in(HostTensor::f32({2, 3, 100}, x)).in(HostTensor::f32({100}, sc), true).in(HostTensor::f32({100}, b), true);
  expect_close(h.eval(s)[0].floats(), want, "LayerNormalization");

  begin("InstanceNormalization");
  const auto ix = random_floats(2 * 3 * 77, 41), is = random_floats(3, 42), ib = random_floats(3, 43);
  auto iw = ref_normalize(ix, 77, 1e-3f);
  for (size_t i = 0; i < iw.size(); ++i) iw[i] = iw[i] * is[(i / 77) % 3] + ib[(i / 77) % 3];
  NodeSpec in("in", "InstanceNormalization");
  in.in(HostTensor::f32({2, 3, 7, 11}, ix)).in(HostTensor::f32({3}, is), true).in(HostTensor::f32({3}, ib), true);
  in.attr_f("epsilon", 1e-3f);
  expect_close(h.eval(in)[0].floats(), iw, "InstanceNormalization");

  begin("BatchNormalization (inference)");
  const auto bx = random_floats(2 * 3 * 4, 44), bs = random_floats(3, 45), bb = random_floats(3, 46),
             bm = random_floats(3, 47);
  const std::vector<float> bv{0.5f, 1.0f, 2.0f};
  std::vector<float> bw(bx.size());
  for (size_t i = 0; i < bx.size(); ++i) {
    const size_t c = (i / 4) % 3;
    bw[i] = static_cast<float>((bx[i] - bm[c]) / std::sqrt(bv[c] + 1e-5) * bs[c] + bb[c]);
  }
  NodeSpec bn("bn", "BatchNormalization", 15);
  bn.in(HostTensor::f32({2, 3, 4}, bx));
  for (const auto* v : {&bs, &bb, &bm, &bv}) bn.in(HostTensor::f32({3}, *v), true);
  expect_close(h.eval(bn)[0].floats(), bw, "BatchNormalization");
}

void copies(Harness& h) {
  begin("Concat (int32, axis 1)");
  std::vector<int32_t> a(2 * 2 * 3), b(2 * 1 * 3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 100 + static_cast<int32_t>(i);
  NodeSpec c("concat", "Concat", 13);
  c.in(HostTensor::of(BH_TYPE_INT32, {2, 2, 3}, a)).in(HostTensor::of(BH_TYPE_INT32, {2, 1, 3}, b)).attr_i("axis", 1);
  auto cy = h.eval(c)[0];
  expect(cy.dims == (Dims{2, 3, 3}), "output shape " + dims_text(cy.dims));
  std::vector<int32_t> got(cy.bytes.size() / 4);
  std::memcpy(got.data(), cy.bytes.data(), cy.bytes.size());
  const std::vector<int32_t> want{0, 1, 2, 3, 4, 5, 100, 101, 102, 6, 7, 8, 9, 10, 11, 103, 104, 105};
  expect(got == want, "Concat's elements differ");

  begin("Slice (negative step, constant inputs)");
  const auto x = random_floats(4 * 6, 48);
  std::vector<float> sw;
  for (int i = 1; i < 4; i += 2)
    for (int j = 5; j > 0; j -= 2) sw.push_back(x[i * 6 + j]);
  NodeSpec sl("slice", "Slice", 13);
  sl.in(HostTensor::f32({4, 6}, x)).in(HostTensor::i64({2}, {1, -1}), true).in(HostTensor::i64({2}, {100, 0}), true);
  sl.in(HostTensor::i64({2}, {0, 1}), true).in(HostTensor::i64({2}, {2, -2}), true);
  auto sy = h.eval(sl)[0];
  expect(sy.dims == (Dims{2, 3}), "output shape " + dims_text(sy.dims));
  expect_close(sy.floats(), sw, "Slice");

  begin("Pad (reflect)");
  std::vector<float> pw;
  const int reflect[] = {2, 1, 0, 1, 2, 3, 4, 5, 4};  // columns for pads 2 before, 1 after on a width of 6
  for (int i = 0; i < 4; ++i)
    for (int j : reflect) pw.push_back(x[i * 6 + j]);
  NodeSpec pd("pad", "Pad", 13);
  pd.in(HostTensor::f32({4, 6}, x)).in(HostTensor::i64({4}, {0, 2, 0, 1}), true).attr_s("mode", "reflect");
  auto py = h.eval(pd)[0];
  expect(py.dims == (Dims{4, 9}), "output shape " + dims_text(py.dims));
  expect_close(py.floats(), pw, "Pad");

  begin("Pad (constant value, uint8)");
  NodeSpec pc("pad_u8", "Pad", 13);
  pc.in(HostTensor::of<uint8_t>(BH_TYPE_UINT8, {3}, {1, 2, 3})).in(HostTensor::i64({2}, {1, 2}), true);
  pc.in(HostTensor::of<uint8_t>(BH_TYPE_UINT8, {}, {9}), true);
  auto pcy = h.eval(pc)[0];
  expect(pcy.bytes == (std::vector<unsigned char>{9, 1, 2, 3, 9, 9}), "uint8 Pad's bytes differ");
}

void matmul(Harness& h) {
  begin("MatMul (broadcast batch)");
  const Dims ad{3, 1, 70, 37}, bd{4, 37, 65};
  const auto a = random_floats(numel(ad), 7), b = random_floats(numel(bd), 8);
  std::vector<float> want(3 * 4 * 70 * 65);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int m = 0; m < 70; ++m)
        for (int n = 0; n < 65; ++n) {
          double acc = 0;
          for (int k = 0; k < 37; ++k) acc += a[(i * 70 + m) * 37 + k] * b[(j * 37 + k) * 65 + n];
          want[((i * 4 + j) * 70 + m) * 65 + n] = static_cast<float>(acc);
        }
  NodeSpec s("mm", "MatMul");
  s.in(HostTensor::f32(ad, a)).in(HostTensor::f32(bd, b));
  auto y = h.eval(s);
  expect(y[0].dims == (Dims{3, 4, 70, 65}), "output shape " + dims_text(y[0].dims));
  expect_close(y[0].floats(), want, "MatMul");

  begin("MatMul (1-D operand)");
  NodeSpec v("mv", "MatMul");
  v.in(HostTensor::f32({37}, std::vector<float>(a.begin(), a.begin() + 37))).in(HostTensor::f32({4, 37, 65}, b));
  auto yv = h.eval(v);
  expect(yv[0].dims == (Dims{4, 65}), "vector-matrix output shape " + dims_text(yv[0].dims));

  begin("MatMul (inner dimensions differ)");
  NodeSpec bad("mm_bad", "MatMul");
  bad.in(HostTensor::f32({2, 3}, random_floats(6, 9))).in(HostTensor::f32({4, 2}, random_floats(8, 10)));
  std::vector<DeviceTensor> ins{h.upload(bad.inputs[0].value), h.upload(bad.inputs[1].value)}, outs;
  BhpKernel* k = h.kernel(bad);
  BhpRun* run = h.begin_run();
  Outcome o = h.compute(k, run, ins, &outs);
  expect(o.code == BH_INVALID_ARGUMENT && o.message.find("mm_bad") != std::string::npos &&
             o.message.find("[2,3]") != std::string::npos,
         "a shape mismatch gave " + std::to_string(o.code) + " '" + o.message + "'");
  h.t().end_run(run, 0);
  h.t().destroy_kernel(k);
  h.free_all();

  begin("Gemm (transB, C broadcast)");
  const auto ga = random_floats(5 * 7, 11), gb = random_floats(9 * 7, 12), gc = random_floats(9, 13);
  std::vector<float> gw(5 * 9);
  for (int m = 0; m < 5; ++m)
    for (int n = 0; n < 9; ++n) {
      double acc = 0;
      for (int k2 = 0; k2 < 7; ++k2) acc += ga[m * 7 + k2] * gb[n * 7 + k2];
      gw[m * 9 + n] = static_cast<float>(0.5 * acc + 2.0 * gc[n]);
    }
  NodeSpec g("gemm", "Gemm", 13);
  g.in(HostTensor::f32({5, 7}, ga)).in(HostTensor::f32({9, 7}, gb), true).in(HostTensor::f32({9}, gc), true);
  g.attr_i("transB", 1).attr_f("alpha", 0.5f).attr_f("beta", 2.0f);
  expect_close(h.eval(g)[0].floats(), gw, "Gemm");
}

void add_broadcast(Harness& h) {
  begin("Add (broadcast)");
  const Dims ad{2, 3, 1, 5}, bd{4, 1};
  const auto a = random_floats(numel(ad), 14), b = random_floats(numel(bd), 15);
  std::vector<float> want(2 * 3 * 4 * 5);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 5; ++l) want[((i * 3 + j) * 4 + k) * 5 + l] = a[(i * 3 + j) * 5 + l] + b[k];
  NodeSpec s("add", "Add", 14);
  s.in(HostTensor::f32(ad, a)).in(HostTensor::f32(bd, b));
  auto y = h.eval(s);
  expect(y[0].dims == (Dims{2, 3, 4, 5}), "output shape " + dims_text(y[0].dims));
  expect_close(y[0].floats(), want, "Add");

  begin("Add (refuses int64)");
  BhpKernel* k = nullptr;
  NodeSpec bad("add_i64", "Add", 14);
  bad.in(HostTensor::i64({2}, {1, 2})).in(HostTensor::i64({2}, {3, 4}));
  expect(h.try_kernel(bad, &k).code == BH_UNSUPPORTED, "an int64 Add was accepted");
}

void softmax(Harness& h) {
  begin("Softmax (axis 1, opset 13)");
  const Dims xd{2, 5, 3};
  const auto x = random_floats(numel(xd), 16);
  std::vector<float> want(x.size());
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      double m = -1e30, sum = 0;
      for (int j = 0; j < 5; ++j) m = std::max<double>(m, x[(i * 5 + j) * 3 + k]);
      for (int j = 0; j < 5; ++j) sum += std::exp(x[(i * 5 + j) * 3 + k] - m);
      for (int j = 0; j < 5; ++j)
        want[(i * 5 + j) * 3 + k] = static_cast<float>(std::exp(x[(i * 5 + j) * 3 + k] - m) / sum);
    }
  NodeSpec s("softmax", "Softmax", 13);
  s.in(HostTensor::f32(xd, x)).attr_i("axis", 1);
  expect_close(h.eval(s)[0].floats(), want, "Softmax");

  begin("Softmax (opset 11 coerces to 2-D)");
  std::vector<float> want2(x.size());
  for (int i = 0; i < 2; ++i) {
    double m = -1e30, sum = 0;
    for (int j = 0; j < 15; ++j) m = std::max<double>(m, x[i * 15 + j]);
    for (int j = 0; j < 15; ++j) sum += std::exp(x[i * 15 + j] - m);
    for (int j = 0; j < 15; ++j) want2[i * 15 + j] = static_cast<float>(std::exp(x[i * 15 + j] - m) / sum);
  }
  NodeSpec c("softmax11", "Softmax", 11);
  c.in(HostTensor::f32(xd, x)).attr_i("axis", 1);
  expect_close(h.eval(c)[0].floats(), want2, "Softmax-11");
}

void maxpool(Harness& h) {
  begin("MaxPool (pads, strides, ceil_mode)");
  const Dims xd{1, 2, 7, 8};
  const auto x = random_floats(numel(xd), 17);
  // 3x3 window, stride 2, pads 1 each side, ceil_mode: ceil((in + 2 - 3) / 2) + 1 = 4 rows and 5 columns.
  const int OH = 4, OW = 5;
  std::vector<float> want(2 * OH * OW);
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < OH; ++oh)
      for (int ow = 0; ow < OW; ++ow) {
        float m = -3.4e38f;
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) {
            const int ih = oh * 2 - 1 + a, iw = ow * 2 - 1 + b;
            if (ih >= 0 && ih < 7 && iw >= 0 && iw < 8) m = std::max(m, x[(c * 7 + ih) * 8 + iw]);
          }
        want[(c * OH + oh) * OW + ow] = m;
      }
  NodeSpec s("pool", "MaxPool", 12);
  s.in(HostTensor::f32(xd, x)).attr_ints("kernel_shape", {3, 3}).attr_ints("strides", {2, 2});
  s.attr_ints("pads", {1, 1, 1, 1}).attr_i("ceil_mode", 1);
  auto y = h.eval(s);
  expect(y[0].dims == (Dims{1, 2, OH, OW}), "output shape " + dims_text(y[0].dims));
  expect_close(y[0].floats(), want, "MaxPool");

  begin("MaxPool (refuses Indices)");
  BhpKernel* k = nullptr;
  s.outputs = 2;
  expect(h.try_kernel(s, &k).code == BH_UNSUPPORTED, "MaxPool with Indices was accepted");
}

void resize(Harness& h) {
  begin("Resize (nearest, asymmetric, floor)");
  const Dims xd{1, 2, 3, 4};
  const auto x = random_floats(numel(xd), 18);
  std::vector<float> want(2 * 6 * 8);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 8; ++j) want[(c * 6 + i) * 8 + j] = x[(c * 3 + i / 2) * 4 + j / 2];
  NodeSpec s("up", "Resize", 13);
  s.in(HostTensor::f32(xd, x)).absent().in(HostTensor::f32({4}, {1, 1, 2, 2}), true);
  s.attr_s("mode", "nearest").attr_s("coordinate_transformation_mode", "asymmetric").attr_s("nearest_mode", "floor");
  auto y = h.eval(s);
  expect(y[0].dims == (Dims{1, 2, 6, 8}), "output shape " + dims_text(y[0].dims));
  expect_close(y[0].floats(), want, "nearest Resize");

  begin("Resize (linear, half_pixel, sizes)");
  const int OH = 5, OW = 7;
  std::vector<float> lw(2 * OH * OW);
  auto taps = [](int o, int in, int out, int* i0, int* i1, double* w1) {
    const double pos = (o + 0.5) * in / out - 0.5, fl = std::floor(pos);
    int base = static_cast<int>(fl);
    double ratio = pos - fl;
    if (pos == fl) {
      base -= 1;
      ratio = 1;
    }
    *i0 = std::clamp(base, 0, in - 1);
    *i1 = std::clamp(base + 1, 0, in - 1);
    *w1 = ratio;
  };
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < OH; ++i)
      for (int j = 0; j < OW; ++j) {
        int y0, y1, x0, x1;
        double wy, wx;
        taps(i, 3, OH, &y0, &y1, &wy);
        taps(j, 4, OW, &x0, &x1, &wx);
        auto at = [&](int yy, int xx) { return x[(c * 3 + yy) * 4 + xx]; };
        lw[(c * OH + i) * OW + j] = static_cast<float>((1 - wy) * ((1 - wx) * at(y0, x0) + wx * at(y0, x1)) +
                                                       wy * ((1 - wx) * at(y1, x0) + wx * at(y1, x1)));
      }
  NodeSpec l("lin", "Resize", 13);
  l.in(HostTensor::f32(xd, x)).absent().absent().in(HostTensor::i64({4}, {1, 2, OH, OW}), true);
  l.attr_s("mode", "linear");
  expect_close(h.eval(l)[0].floats(), lw, "linear Resize");
}

void transpose(Harness& h) {
  begin("Transpose (int64, perm 2 0 1)");
  std::vector<int64_t> x(2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(i) * 1000003 - (int64_t{1} << 40);
  NodeSpec s("tr", "Transpose", 13);
  s.in(HostTensor::i64({2, 3, 4}, x)).attr_ints("perm", {2, 0, 1});
  auto y = h.eval(s)[0];
  expect(y.dims == (Dims{4, 2, 3}), "output shape " + dims_text(y.dims));
  std::vector<int64_t> got(y.bytes.size() / 8);
  std::memcpy(got.data(), y.bytes.data(), y.bytes.size());
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)
        expect(got[(a * 2 + b) * 3 + c] == x[(b * 3 + c) * 4 + a], "element " + std::to_string((a * 2 + b) * 3 + c));
}

void gather(Harness& h) {
  const Dims xd{5, 3};
  const auto x = random_floats(numel(xd), 19);
  const std::vector<int64_t> idx{4, -1, 0, -5, 2, 2};
  std::vector<float> want;
  for (int64_t i : idx)
    for (int j = 0; j < 3; ++j) want.push_back(x[((i + 5) % 5) * 3 + j]);
  for (bool constant : {true, false}) {
    begin(constant ? "Gather (constant negative indices)" : "Gather (run-time negative indices)");
    NodeSpec s("gather", "Gather", 13);
    s.in(HostTensor::f32(xd, x)).in(HostTensor::i64({2, 3}, idx), constant).attr_i("axis", 0);
    auto y = h.eval(s)[0];
    expect(y.dims == (Dims{2, 3, 3}), "output shape " + dims_text(y.dims));
    expect_close(y.floats(), want, "Gather");
  }
  begin("Gather (index out of range)");
  NodeSpec bad("gather_oob", "Gather", 13);
  bad.in(HostTensor::f32(xd, x)).in(HostTensor::i64({1}, {5})).attr_i("axis", 0);
  std::vector<DeviceTensor> ins{h.upload(bad.inputs[0].value), h.upload(bad.inputs[1].value)}, outs;
  BhpKernel* k = h.kernel(bad);
  BhpRun* run = h.begin_run();
  Outcome o = h.compute(k, run, ins, &outs);
  expect(o.code == BH_INVALID_ARGUMENT && o.message.find("out of range") != std::string::npos,
         "an out-of-range index gave '" + o.message + "'");
  h.t().end_run(run, 0);
  h.t().destroy_kernel(k);
  h.free_all();
}

void reshape(Harness& h) {
  begin("Reshape (alias, 0 and -1)");
  NodeSpec s("reshape", "Reshape", 14);
  s.in(HostTensor::f32({2, 3, 4}, random_floats(24, 20))).in(HostTensor::i64({3}, {0, -1, 2}), true);
  std::vector<DeviceTensor> ins{h.upload(s.inputs[0].value), h.upload(s.inputs[1].value)}, outs;
  const uint64_t dispatches = h.counters().dispatches;
  BhpKernel* k = h.kernel(s);
  BhpRun* run = h.begin_run();
  check(h.compute(k, run, ins, &outs), "compute");
  check(h.t().flush(run), "flush");
  h.t().end_run(run, 1);
  expect(outs[0].handle == ins[0].handle && outs[0].offset == ins[0].offset, "Reshape did not alias its input");
  expect(outs[0].dims == (Dims{2, 6, 2}), "alias shape " + dims_text(outs[0].dims));
  expect(h.counters().dispatches == dispatches, "a view dispatched a kernel");
  h.t().destroy_kernel(k);
  h.free_all();
}

void folding(Harness& h) {
  begin("compute outside a run (constant folding)");
  const auto x = random_floats(64, 21);
  NodeSpec s("fold", "Sigmoid", 13);
  s.in(HostTensor::f32({64}, x));
  std::vector<DeviceTensor> ins{h.upload(s.inputs[0].value)}, outs;
  BhpKernel* k = h.kernel(s);
  const BhpCounters before = h.counters();
  check(h.compute(k, nullptr, ins, &outs), "compute");
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = 1.0f / (1.0f + std::exp(-x[i]));
  expect_close(h.download(outs[0]).floats(), want, "Sigmoid without a run");
  const BhpCounters after = h.counters();
  expect(after.run_submits == before.run_submits, "a folding call counted as a run's submit");
  h.t().destroy_kernel(k);
  h.free_all();
}

// Four Relu dispatches in one run under `policy`: the submits its flush makes.
void policy(const Plugin& p, const char* policy, uint64_t want_submits) {
  begin(std::string("policy ") + policy);
  Harness h(p, "", policy);
  const auto x = random_floats(1024, 22);
  NodeSpec s("relu", "Relu", 14);
  s.in(HostTensor::f32({1024}, x));
  BhpKernel* k = h.kernel(s);
  std::vector<DeviceTensor> cur{h.upload(s.inputs[0].value)}, outs;
  const BhpCounters before = h.counters();
  BhpRun* run = h.begin_run();
  for (int i = 0; i < 4; ++i) {
    Outcome o = h.compute(k, run, cur, &outs);
    if (o.code) fail("compute: " + o.message);
    cur = outs;
  }
  check(h.t().flush(run), "flush");
  check(h.t().flush(run), "a second, empty flush");
  h.t().end_run(run, 1);
  const BhpCounters after = h.counters();
  expect(after.dispatches - before.dispatches == 4,
         "dispatches " + std::to_string(after.dispatches - before.dispatches));
  expect(after.run_submits - before.run_submits == want_submits,
         "run_submits " + std::to_string(after.run_submits - before.run_submits) + ", expected " +
             std::to_string(want_submits));
  expect(after.replays == 0, "replays without capture");
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::max(x[i], 0.f);
  expect_close(h.download(cur[0]).floats(), want, "the chain's result");
  h.t().destroy_kernel(k);
  h.free_all();
}

void bad_policy(const Plugin& p) {
  begin("unknown session policy");
  BhpBackend* b = nullptr;
  BhpDevice* d = nullptr;
  BhpSession* s = nullptr;
  check(p.t->create_backend(&p.host, "", &b), "create_backend");
  check(p.t->open_device(b, 0, &d), "open_device");
  BhpSessionConfig c{sizeof c, "bad", "sometimes", 0};
  expect_error(p.t->open_session(d, &c, &s), BH_INVALID_ARGUMENT, "sometimes", "open_session");
  expect(s == nullptr, "a failed open_session wrote its out-parameter");
  p.t->close_device(d);
  p.t->destroy_backend(b);
}

// Two threads, each with its own runs of one session.
void concurrent_runs(Harness& h) {
  begin("concurrent runs of one session");
  const auto x = random_floats(4096, 23);
  NodeSpec s("tanh", "Tanh", 13);
  s.in(HostTensor::f32({4096}, x));
  BhpKernel* k = h.kernel(s);
  DeviceTensor in = h.upload(s.inputs[0].value);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::tanh(x[i]);
  std::vector<std::vector<DeviceTensor>> outs(2);
  std::vector<Outcome> results(2);
  auto work = [&](int t) {
    for (int r = 0; r < 5 && !results[t].code; ++r) {
      BhpRun* run = nullptr;
      BhpRunInfo info{sizeof info, 1, 1};
      results[t] = take(h.t().begin_run(h.session(), &info, &run));
      if (results[t].code) return;
      std::vector<DeviceTensor> o;
      results[t] = h.compute(k, run, {in}, &o);
      if (!results[t].code) results[t] = take(h.t().flush(run));
      h.t().end_run(run, results[t].code == 0);
      outs[t].push_back(o[0]);
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  for (int t = 0; t < 2; ++t) {
    if (results[t].code) fail("thread " + std::to_string(t) + ": " + results[t].message);
    for (const auto& o : outs[t]) expect_close(h.download(o).floats(), want, "a concurrent run's result");
  }
  h.t().destroy_kernel(k);
  h.free_all();
}

// fail_at=<step>: the step fails with the injected error; the same step on a backend
// without the option then works, and nothing leaks (memory_bytes, a clean teardown).
void failure_injection(const Plugin& p) {
  const char* steps[] = {"create_backend", "open_device",   "build_programs", "open_session",
                         "allocate",       "create_kernel", "begin_run"};
  for (const char* step : steps) {
    begin(std::string("fail_at=") + step);
    const std::string needle = std::string("injected failure at ") + step;
    for (bool inject : {true, false}) {
      const std::string options = inject ? "fail_at=" + std::string(step) : "";
      BhpBackend* b = nullptr;
      BhpDevice* d = nullptr;
      BhpSession* s = nullptr;
      auto expect_step = [&](BhpStatus* st, const char* here) {
        if (inject && std::strcmp(step, here) == 0) {
          expect_error(st, BH_INTERNAL, needle, here);
          return false;
        }
        check(st, std::string(here) + (inject ? " (before the injected step)" : " (after an injected failure)"));
        return true;
      };
      bool go = expect_step(p.t->create_backend(&p.host, options.c_str(), &b), "create_backend");
      if (go)
        go = expect_step(p.t->open_device(b, 0, &d),
                         std::strcmp(step, "build_programs") == 0 ? "build_programs" : "open_device");
      if (go) {
        BhpSessionConfig c{sizeof c, "inject", "", 1};
        go = expect_step(p.t->open_session(d, &c, &s), "open_session");
      }
      if (go) {
        BhpCounters before{sizeof before};
        check(p.t->counters(d, &before), "counters");
        BhpBuffer buf{sizeof buf};
        go = expect_step(p.t->allocate(d, s, 4096, &buf), "allocate");
        BhpCounters after{sizeof after};
        check(p.t->counters(d, &after), "counters");
        if (go) {
          p.t->free_buffer(d, s, buf.handle);
        } else {
          expect(after.memory_bytes == before.memory_bytes, "the failed allocation kept its memory");
        }
      }
      if (go) {
        NodeSpec spec("relu", "Relu", 14);
        spec.in(HostTensor::f32({4}, {1, -1, 2, -2}));
        NodeView v(spec);
        BhpKernel* k = nullptr;
        go = expect_step(p.t->create_kernel(d, &v.node, &k), "create_kernel");
        if (go) p.t->destroy_kernel(k);
      }
      if (go) {
        BhpRunInfo info{sizeof info, 0, 1};
        BhpRun* r = nullptr;
        go = expect_step(p.t->begin_run(s, &info, &r), "begin_run");
        if (go) {
          check(p.t->flush(r), "flush");
          p.t->end_run(r, 1);
        }
      }
      if (s) p.t->close_session(s);
      if (d) p.t->close_device(d);
      if (b) p.t->destroy_backend(b);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <path/to/libbulkhead_opencl.so>\n", argv[0]);
    return 2;
  }
  Plugin p;
  p.lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!p.lib) fail(std::string("cannot load the plugin: ") + dlerror());
  p.entry = reinterpret_cast<BhpEntryFn>(dlsym(p.lib, BHP_ENTRY_NAME));
  if (!p.entry) fail("the plugin exports no " BHP_ENTRY_NAME);
  const uint32_t v1[] = {1};
  uint32_t chosen = 0;
  const void* table = nullptr;
  if (p.entry(v1, 1, &chosen, &table) != 0 || !table) fail("the plugin refused ABI version 1");
  p.t = static_cast<const BhpPluginV1*>(table);
  p.host = BhpHost{sizeof(BhpHost), 1, nullptr, make_status, log_line};

  entry_negotiation(p);
  bad_options(p);
  if (enumerate(p) == 0) {
    std::printf("no OpenCL device: the device cases are skipped\n");
  } else {
    memory(p);
    {
      Harness h(p, "");
      conv(h);
      conv_more(h);
      matmul(h);
      add_broadcast(h);
      unary(h);
      softmax(h);
      reductions(h);
      normalizations(h);
      maxpool(h);
      resize(h);
      transpose(h);
      copies(h);
      gather(h);
      reshape(h);
      folding(h);
      concurrent_runs(h);
    }
    policy(p, "single", 1);
    policy(p, "per-dispatch", 1);
    policy(p, "split", 4);
    policy(p, "auto", 1);
    policy(p, "auto:4K", 4);  // each Relu writes 4 KiB
    bad_policy(p);
    failure_injection(p);
  }
  begin("teardown (dlclose)");
  if (dlclose(p.lib) != 0) fail(std::string("dlclose: ") + dlerror());
  begin("");
  std::printf("opencl_direct_test: all cases passed\n");
  return 0;
}
