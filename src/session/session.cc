#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "common/parse.h"
#include "exec/channel_shuffle.h"
#include "exec/executor.h"
#include "exec/layout.h"
#include "exec/optimize.h"
#include "exec/qdq_eltwise.h"
#include "exec/work.h"
#include "ir/onnx_import.h"
#include "isolate/remote_session.h"
#include "isolate/session_hooks.h"
#include "memory/host_pages.h"
#include "memory/planned_allocator.h"
#include "session/env_impl.h"
#include "session/threads_probe.h"

namespace bulkhead {

struct SessionAccess {
  static Session make(std::shared_ptr<SessionImpl> impl) {
    Session s;
    s.impl_ = std::move(impl);
    return s;
  }
  static const SessionImpl* impl(const Session& s) { return s.impl_.get(); }
};

class SessionImpl {
 public:
  std::shared_ptr<EnvImpl> env;
  SessionOptions options;
  ir::Model model;
  exec::CompileOptions compile_options;
  std::unique_ptr<exec::CompiledGraph> plan;
  // The buffers of the plan's constants (weights, folded values), which an output must
  // never alias; made once with the plan.
  std::unordered_set<const Buffer*> constant_buffers;
  std::vector<IoInfo> all_inputs;  // every graph input, in graph order (binding order)
  std::vector<bool> input_required;  // false for inputs that default to an initializer
  std::vector<bool> input_bindable;  // required inputs, and initializer defaults of IR >= 4 models
  std::vector<IoInfo> inputs, outputs;  // public: required inputs only
  Session::PrecisionUse precision;
  Session::ThreadUse threads;
  // one_thread_when_small: a session of small nodes times its first runs at one thread and
  // at `threads`, and keeps the faster (null: every run asks for compile_options.threads).
  std::unique_ptr<ThreadsProbe> threads_probe;
  // isolation "process": the session lives in a worker and runs are forwarded there
  // (no model, no plan here).
  std::unique_ptr<isolate::RemoteSession> remote;

  // Runs executing now, against options.max_concurrent_runs; waiters queue by ticket.
  struct Slots {
    std::mutex mu;
    std::condition_variable cv;
    int running = 0, most = 0;
    uint64_t next_ticket = 0, serving = 0;  // FIFO: a waiter runs when its ticket is served
    uint64_t waited = 0, timed_out = 0;
    std::unordered_set<uint64_t> abandoned;  // tickets of waiters that timed out
  };
  mutable Slots slots;

  ~SessionImpl() {
    // Kernels and constants go before the devices and allocators they came from.
    plan.reset();
    compile_options.placements.clear();
  }
};

namespace {

IoInfo to_io(const ir::ValueInfo& v) {
  IoInfo io;
  io.name = v.name;
  io.dtype = v.dtype;
  io.is_tensor = v.type == ir::ValueType::kTensor;
  io.type_string = v.type_string();
  if (v.shape) {
    io.has_shape = true;
    for (auto& d : *v.shape) {
      io.shape.push_back(d.fixed() ? d.value : -1);
      io.dim_names.push_back(d.param);
    }
  }
  return io;
}

// BULKHEAD_CPU_SERIAL_BYTES=0 turns the CPU's policy for small work off, in the kernels
// (backends/cpu/cpu_kernels.h) and here (a session of small nodes on one thread).
bool small_work_policy_on() {
  const char* e = std::getenv("BULKHEAD_CPU_SERIAL_BYTES");
  return !(e && std::atoll(e) == 0);
}

int default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

// Replaces every initializer of `g` and its subgraphs by the Env's shared copy of the
// same contents (SharedConstants::intern), so that the private copy the import made is
// freed. The model was imported for this session alone: nothing else sees its graphs.
void intern_initializers(ir::Graph& g, SharedConstants& shared) {
  for (auto& [name, t] : g.initializers) t = shared.intern(t);
  for (auto& node : g.nodes)
    for (auto& [aname, a] : node.attrs) {
      if (a.g) intern_initializers(const_cast<ir::Graph&>(*a.g), shared);
      for (auto& sub : a.graphs)
        if (sub) intern_initializers(const_cast<ir::Graph&>(*sub), shared);
    }
}

Result<Session> build_session(const std::shared_ptr<EnvImpl>& env, ir::Model model, const SessionOptions& options) {
  auto impl = std::make_shared<SessionImpl>();
  impl->env = env;
  impl->options = options;
  impl->model = std::move(model);
  uint64_t id = env->next_session_id();
  impl->compile_options.threads = options.threads ? options.threads : default_threads();
  impl->compile_options.router = env->router().get();
  impl->compile_options.max_tensor_bytes = options.max_tensor_bytes;
  for (const auto& spec : options.devices) {
    BH_ASSIGN_OR_RETURN(auto dev, env->acquire_device(spec));
    SessionConfig config{"session#" + std::to_string(id), options.submit_policy, options.graph_capture,
                         options.release_idle_memory ? 0 : options.release_idle_after_ms};
    auto alloc = dev->open_session(config);
    if (!alloc.is_ok()) return alloc.status().with_context("device '" + spec + "': ");
    impl->compile_options.placements.push_back({std::move(dev), std::move(alloc).value()});
  }
  // SessionOptions::precision "bf16": CPU sessions on a CPU with bf16 units (the layout
  // pass marks the nodes); anywhere else the session says why, once per Env, and runs fp32.
  const DeviceInfo& first = impl->compile_options.placements.front().device->info();
  Session::PrecisionUse& prec = impl->precision;
  prec.requested = options.precision;
  prec.effective = "fp32";
  const bool want_bf16 = options.precision == "bf16";
  if (want_bf16 && first.backend != "cpu")
    prec.note = "precision bf16 is a CPU option; nodes on " + first.backend + ":" + std::to_string(first.ordinal) +
                " compute as that device does";
  else if (want_bf16 && first.bf16_units.empty())
    prec.note = "this CPU (" + first.name + ") has no bf16 units (AMX or AVX512-BF16)";
  if (options.optimization_level > 0) {
    const bool cpu_only = options.optimization_level > 1 && first.backend == "cpu";
    BH_RETURN_IF_ERROR(exec::optimize_graph(*impl->model.graph, impl->model.ir_version < 4, cpu_only));
    // Every node runs on the CPU when it is the first device: keep convolution chains in
    // oneDNN's channel-blocked layout (exec/layout.h).
    if (options.optimization_level > 1 && first.backend == "cpu") {
      // QDQ models: the float ops between int8 kernels in one pass (exec/qdq_eltwise.h),
      // before the layout pass, which keeps such chains channels-last.
      exec::fuse_quantized_elementwise(*impl->model.graph, impl->model.ir_version < 4);
      // Channel shuffles read in place by the depthwise convolution after them (ShuffleNet).
      exec::fold_channel_shuffles(*impl->model.graph, impl->model.ir_version < 4);
      exec::LayoutOptions lo;
      lo.input_defaults_constant = impl->model.ir_version < 4;
      lo.bf16 = want_bf16 && prec.note.empty();
      BH_ASSIGN_OR_RETURN(exec::LayoutStats ls, exec::block_channels(*impl->model.graph, lo));
      prec.bf16_nodes = ls.bf16_nodes;
      if (lo.bf16 && ls.bf16_nodes == 0)
        prec.note = "the model has no convolution or matrix product with constant float32 weights";
      if (ls.bf16_nodes > 0) prec.effective = "bf16";
    }
  }
  if (want_bf16 && !prec.note.empty())
    env->warn_once("precision-bf16:" + prec.note, "bulkhead: precision bf16: " + prec.note + "; running fp32");
  if (options.share_weights) {
    impl->compile_options.shared = env->shared_constants();
    const uint64_t hits = impl->compile_options.shared->stats().hit_bytes;
    intern_initializers(*impl->model.graph, *impl->compile_options.shared);
    // The copies the import made of weights another session already holds are freed now:
    // give them back to the system rather than leave them in the heap (on glibc they
    // stay resident otherwise; 8 sessions of ResNet-50 kept 20 MiB so).
    if (impl->compile_options.shared->stats().hit_bytes - hits >= (1u << 20)) trim_malloc_heaps();
  }
  const ir::Graph& g = *impl->model.graph;
  // Every node small (exec/work.h): whether a second core pays is timed on the first runs
  // (ThreadsProbe); the plan is made for the threads asked for, and one-thread runs make
  // their primitives at their first run.
  impl->threads.requested = impl->threads.effective = impl->compile_options.threads;
  if (options.one_thread_when_small && impl->compile_options.threads > 1 && first.backend == "cpu" &&
      impl->compile_options.placements.size() == 1 && small_work_policy_on()) {
    const double macs = exec::largest_node_macs(g);
    if (macs < exec::kSmallModelMacs) {
      char why[160];
      std::snprintf(why, sizeof why, "every node has fewer than 16 M multiply-adds (the largest %.1f M)", macs / 1e6);
      impl->threads_probe = std::make_unique<ThreadsProbe>(impl->compile_options.threads, why);
    }
  }
  // IR >= 4: an input with an initializer is a default the caller may override. IR < 4
  // lists every initializer as an input; there they are constants (as in ONNX Runtime).
  const bool defaults_overridable = impl->model.ir_version >= 4;
  for (auto& in : g.inputs)
    if (g.initializers.count(in.name) && defaults_overridable) impl->compile_options.overridable.insert(in.name);
  auto compiled = exec::compile(g, impl->compile_options);
  if (!compiled.is_ok()) return compiled.status().with_context("'" + impl->model.path + "': ");
  impl->plan = std::move(compiled).value();
  for (const auto& [slot, v] : impl->plan->constants)
    if (v.is_tensor() && v.tensor.buffer()) impl->constant_buffers.insert(v.tensor.buffer().get());
  for (const auto& [name, t] : impl->plan->constant_values)
    if (t.buffer()) impl->constant_buffers.insert(t.buffer().get());
  for (auto& in : g.inputs) {
    bool required = !g.initializers.count(in.name);
    impl->all_inputs.push_back(to_io(in));
    impl->input_required.push_back(required);
    impl->input_bindable.push_back(required || defaults_overridable);
    if (required) impl->inputs.push_back(impl->all_inputs.back());
  }
  for (auto& out : g.outputs) impl->outputs.push_back(to_io(out));
  return SessionAccess::make(std::move(impl));
}

constexpr int kMaxConcurrentRuns = 1 << 20;

// Every option a session is built with, checked once: from parse(), or set in code.
Status check_options(const SessionOptions& o) {
  if (o.threads < 0 || o.threads > SessionOptions::kMaxThreads)
    return invalid_argument("bad value " + std::to_string(o.threads) + " for session option 'threads': expected 0.." +
                            std::to_string(SessionOptions::kMaxThreads) + " (0 = every core)");
  if (o.devices.empty()) return invalid_argument("session option 'devices' is empty");
  for (const auto& d : o.devices)
    if (d.empty()) return invalid_argument("session option 'devices' has an empty entry");
  if (o.optimization_level < 0 || o.optimization_level > 2)
    return invalid_argument("bad value " + std::to_string(o.optimization_level) +
                            " for session option 'optimization_level': expected 0, 1 or 2");
  if (o.isolation != "in-process" && o.isolation != "process")
    return invalid_argument("bad value '" + o.isolation + "' for session option 'isolation': expected in-process or process");
  if (o.worker_timeout_ms <= 0)
    return invalid_argument("bad value " + std::to_string(o.worker_timeout_ms) +
                            " for session option 'worker_timeout_ms': expected a positive number of milliseconds");
  if (o.max_file_bytes == 0) return invalid_argument("session option 'max_file_bytes' is 0");
  if (o.max_loop_iterations < 0)
    return invalid_argument("bad value " + std::to_string(o.max_loop_iterations) + " for session option 'max_loop_iterations': expected >= 0");
  if (o.run_timeout_ms < 0)
    return invalid_argument("bad value " + std::to_string(o.run_timeout_ms) + " for session option 'run_timeout_ms': expected >= 0");
  if (o.precision != "fp32" && o.precision != "bf16")
    return invalid_argument("bad value '" + o.precision + "' for session option 'precision': expected fp32 or bf16");
  if (o.precision == "bf16" && o.optimization_level < 2)
    return invalid_argument("session option 'precision' bf16 needs optimization_level 2, got " +
                            std::to_string(o.optimization_level));
  if (o.release_idle_after_ms < -1 || o.release_idle_after_ms > SessionOptions::kMaxReleaseIdleAfterMs)
    return invalid_argument("bad value " + std::to_string(o.release_idle_after_ms) +
                            " for session option 'release_idle_after_ms': expected -1.." +
                            std::to_string(SessionOptions::kMaxReleaseIdleAfterMs) + " (-1 = never, 0 = as soon as no run is open)");
  if (o.max_concurrent_runs < 0 || o.max_concurrent_runs > kMaxConcurrentRuns)
    return invalid_argument("bad value " + std::to_string(o.max_concurrent_runs) +
                            " for session option 'max_concurrent_runs': expected 0.." + std::to_string(kMaxConcurrentRuns) +
                            " (0 = no limit)");
  return Status::ok();
}

// isolation "process": a session whose model lives in a worker (isolate/remote_session.h).
Result<Session> build_remote_session(const std::shared_ptr<EnvImpl>& env, const isolate::ModelSource& source,
                                     const SessionOptions& options) {
  BH_ASSIGN_OR_RETURN(auto remote, isolate::RemoteSession::create(source, options));
  auto impl = std::make_shared<SessionImpl>();
  impl->env = env;
  impl->options = options;
  const isolate::ModelInfo& info = remote->info();
  impl->all_inputs = info.all_inputs;
  impl->input_required = info.required;
  impl->input_bindable = info.bindable;
  for (size_t i = 0; i < info.all_inputs.size(); ++i)
    if (info.required[i]) impl->inputs.push_back(info.all_inputs[i]);
  impl->outputs = info.outputs;
  impl->remote = std::move(remote);
  return SessionAccess::make(std::move(impl));
}

Status check_input(const IoInfo& io, const Value& v) {
  if (!io.is_tensor) return Status::ok();
  if (!v.is_tensor()) return invalid_argument("input '" + io.name + "': expected a tensor " + io.type_string + ", got " + v.describe());
  const Tensor& t = v.tensor;
  if (io.dtype != DataType::kUndefined && t.dtype() != io.dtype)
    return invalid_argument("input '" + io.name + "': expected element type " + dtype_name(io.dtype) + ", got " + dtype_name(t.dtype()));
  if (io.has_shape) {
    bool ok = static_cast<int>(io.shape.size()) == t.rank();
    for (size_t i = 0; ok && i < io.shape.size(); ++i) ok = io.shape[i] < 0 || io.shape[i] == t.shape()[i];
    if (!ok) return invalid_argument("input '" + io.name + "': expected shape " + io.type_string + ", got " + t.describe());
  }
  if (t.dtype() != DataType::kString && t.numel() > 0 && !t.raw())
    return invalid_argument("input '" + io.name + "': tensor has no host-readable data");
  return Status::ok();
}

}  // namespace

Result<SessionOptions> SessionOptions::parse(const std::string& spec) {
  SessionOptions o;
  BH_RETURN_IF_ERROR(o.apply(spec));
  return o;
}

Status SessionOptions::validate() const { return check_options(*this); }

Status SessionOptions::apply(const std::string& spec) {
  SessionOptions o = *this;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(';', pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) return invalid_argument("bad session option '" + item + "': expected KEY=VALUE");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "devices" || k == "device") {
      o.devices.clear();
      size_t p = 0;
      while (p <= v.size()) {
        size_t c = v.find(',', p);
        if (c == std::string::npos) c = v.size();
        if (c == p) return invalid_argument("session option 'devices' has an empty entry in '" + v + "'");
        o.devices.push_back(v.substr(p, c - p));
        p = c + 1;
      }
    } else if (k == "threads") {
      int64_t n = 0;
      if (!parse_int_in(v, 0, SessionOptions::kMaxThreads, &n))
        return invalid_argument("bad value '" + v + "' for session option 'threads': expected an integer 0.." +
                                std::to_string(SessionOptions::kMaxThreads) + " (0 = every core)");
      o.threads = static_cast<int>(n);
    } else if (k == "graph_capture") {
      if (v == "1" || v == "true" || v == "on") o.graph_capture = true;
      else if (v == "0" || v == "false" || v == "off") o.graph_capture = false;
      else return invalid_argument("bad value '" + v + "' for session option 'graph_capture': expected 0 or 1");
    } else if (k == "optimization_level") {
      if (v == "0" || v == "1" || v == "2") o.optimization_level = v[0] - '0';
      else return invalid_argument("bad value '" + v + "' for session option 'optimization_level': expected 0, 1 or 2");
    } else if (k == "isolation") {
      if (v != "in-process" && v != "process")
        return invalid_argument("bad value '" + v + "' for session option 'isolation': expected in-process or process");
      o.isolation = v;
    } else if (k == "worker_timeout_ms") {
      int64_t n = 0;
      if (!parse_int_in(v, 1, INT32_MAX, &n))
        return invalid_argument("bad value '" + v + "' for session option 'worker_timeout_ms': expected a positive integer");
      o.worker_timeout_ms = static_cast<int>(n);
    } else if (k == "max_file_bytes") {
      uint64_t n = 0;
      if (!parse_byte_size(v, &n) || n == 0)
        return invalid_argument("bad value '" + v + "' for session option 'max_file_bytes': expected a size such as 512M or 64G");
      o.max_file_bytes = n;
    } else if (k == "max_tensor_bytes") {
      uint64_t n = 0;
      if (!parse_byte_size(v, &n))
        return invalid_argument("bad value '" + v + "' for session option 'max_tensor_bytes': expected a size such as 512M (0 = no limit)");
      o.max_tensor_bytes = n;
    } else if (k == "max_loop_iterations" || k == "run_timeout_ms") {
      int64_t n = 0;
      if (!parse_int_in(v, 0, INT64_MAX, &n))
        return invalid_argument("bad value '" + v + "' for session option '" + k + "': expected a whole number >= 0 (0 = no limit)");
      (k == "run_timeout_ms" ? o.run_timeout_ms : o.max_loop_iterations) = n;
    } else if (k == "max_concurrent_runs") {
      int64_t n = 0;
      if (!parse_int_in(v, 0, kMaxConcurrentRuns, &n))
        return invalid_argument("bad value '" + v + "' for session option 'max_concurrent_runs': expected an integer 0.." +
                                std::to_string(kMaxConcurrentRuns) + " (0 = no limit)");
      o.max_concurrent_runs = static_cast<int>(n);
    } else if (k == "share_weights") {
      if (v == "1" || v == "true" || v == "on") o.share_weights = true;
      else if (v == "0" || v == "false" || v == "off") o.share_weights = false;
      else return invalid_argument("bad value '" + v + "' for session option 'share_weights': expected 0 or 1");
    } else if (k == "release_idle_memory") {
      if (v == "1" || v == "true" || v == "on") o.release_idle_memory = true;
      else if (v == "0" || v == "false" || v == "off") o.release_idle_memory = false;
      else return invalid_argument("bad value '" + v + "' for session option 'release_idle_memory': expected 0 or 1");
    } else if (k == "release_idle_after_ms") {
      int64_t n = 0;
      if (!parse_int_in(v, -1, SessionOptions::kMaxReleaseIdleAfterMs, &n))
        return invalid_argument("bad value '" + v + "' for session option 'release_idle_after_ms': expected an integer -1.." +
                                std::to_string(SessionOptions::kMaxReleaseIdleAfterMs) + " (-1 = never, 0 = as soon as no run is open)");
      o.release_idle_after_ms = static_cast<int>(n);
    } else if (k == "one_thread_when_small") {
      if (v == "1" || v == "true" || v == "on") o.one_thread_when_small = true;
      else if (v == "0" || v == "false" || v == "off") o.one_thread_when_small = false;
      else return invalid_argument("bad value '" + v + "' for session option 'one_thread_when_small': expected 0 or 1");
    } else if (k == "precision") {
      if (v != "fp32" && v != "bf16")
        return invalid_argument("bad value '" + v + "' for session option 'precision': expected fp32 or bf16");
      o.precision = v;
    } else if (k == "worker_binary") {
      if (v.empty()) return invalid_argument("session option 'worker_binary' is empty");
      o.worker_binary = v;
    } else if (k == "submit_policy") {
      if (v.empty()) return invalid_argument("session option 'submit_policy' is empty");
      o.submit_policy = v;  // checked by the device when the session opens on it
    } else {
      return invalid_argument("unknown session option '" + k +
                              "' (known: devices, threads, graph_capture, optimization_level, isolation, "
                              "worker_timeout_ms, worker_binary, submit_policy, max_file_bytes, max_tensor_bytes, max_loop_iterations, "
                              "run_timeout_ms, max_concurrent_runs, share_weights, release_idle_memory, release_idle_after_ms, one_thread_when_small, "
                              "precision)");
    }
  }
  *this = std::move(o);
  return Status::ok();
}

Result<Session> Env::load(const std::string& path, const SessionOptions& options) const {
  BH_RETURN_IF_ERROR(check_options(options));
  if (options.isolation == "process") return build_remote_session(impl_, {path, false, nullptr}, options);
  BH_ASSIGN_OR_RETURN(auto model, ir::load_model(path, options.max_file_bytes));
  return build_session(impl_, std::move(model), options);
}

Result<Session> Env::load_bytes(const std::string& bytes, const std::string& name, const SessionOptions& options) const {
  BH_RETURN_IF_ERROR(check_options(options));
  if (options.isolation == "process") return build_remote_session(impl_, {name, true, &bytes}, options);
  BH_ASSIGN_OR_RETURN(auto model, ir::load_model_from_bytes(bytes.data(), bytes.size(), name, ir::DataFolder{}));
  return build_session(impl_, std::move(model), options);
}

const std::vector<IoInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<IoInfo>& Session::outputs() const { return impl_->outputs; }
const SessionOptions& Session::options() const { return impl_->options; }
Result<Tensor> Session::allocate_input(DataType dtype, Shape shape) const {
  if (!impl_) return invalid_argument("allocate_input on an empty session");
  if (impl_->remote) return Tensor::allocate(impl_->remote->input_allocator(), dtype, std::move(shape));
  return Tensor::allocate(*HostAllocator::create("inputs"), dtype, std::move(shape));
}

int Session::worker_pid() const { return impl_ && impl_->remote ? impl_->remote->worker_pid() : -1; }

Status Session::ensure_worker() const {
  if (!impl_) return invalid_argument("ensure_worker on an empty Session");
  return impl_->remote ? impl_->remote->ensure_worker() : Status::ok();
}

std::vector<std::pair<std::string, int>> Session::placement() const {
  if (impl_->remote) return impl_->remote->info().placement;
  std::vector<std::pair<std::string, int>> r;
  const auto& pl = impl_->compile_options.placements;
  for (size_t i = 0; i < pl.size(); ++i)
    r.emplace_back(pl[i].device->info().backend + ":" + std::to_string(pl[i].device->info().ordinal),
                   impl_->plan->node_count_per_placement[i]);
  return r;
}

Session::ThreadUse Session::threads() const {
  if (!impl_) return {};
  if (impl_->remote) {
    const int t = impl_->options.threads ? impl_->options.threads : default_threads();
    return {t, t, ""};
  }
  Session::ThreadUse use = impl_->threads;
  if (const ThreadsProbe* probe = impl_->threads_probe.get()) {
    const int kept = probe->decided();
    use.effective = kept ? kept : 1;
    use.note = probe->note();
  }
  return use;
}

Session::PrecisionUse Session::precision() const {
  if (!impl_) return {};
  if (impl_->remote) return impl_->remote->info().precision;
  return impl_->precision;
}

Session::RunCounts Session::runs() const {
  RunCounts r;
  if (!impl_) return r;
  auto& sl = impl_->slots;
  std::lock_guard lock(sl.mu);
  r.limit = impl_->options.max_concurrent_runs;
  r.running = sl.running;
  r.most_at_once = sl.most;
  r.waited = sl.waited;
  r.timed_out = sl.timed_out;
  return r;
}

std::vector<Session::MemoryUse> Session::memory() const {
  std::vector<MemoryUse> r;
  if (impl_->remote) return r;
  for (const auto& p : impl_->compile_options.placements)
    r.push_back({p.device->info().backend + ":" + std::to_string(p.device->info().ordinal), p.allocator->stats()});
  return r;
}

namespace {

// One of the session's run slots (SessionOptions::max_concurrent_runs), held for a run's
// whole execution. Without a limit it only counts. Waiters are served in arrival order.
class RunSlot {
 public:
  static Result<RunSlot> acquire(const SessionImpl& s, int64_t timeout_ms, exec::RunLimits::Clock::time_point started) {
    auto& sl = s.slots;
    const int limit = s.options.max_concurrent_runs;
    std::unique_lock lock(sl.mu);
    if (limit > 0 && (sl.running >= limit || sl.serving != sl.next_ticket)) {
      const uint64_t ticket = sl.next_ticket++;
      ++sl.waited;
      auto mine = [&] { return sl.serving == ticket && sl.running < limit; };
      if (timeout_ms > 0) {
        if (!sl.cv.wait_until(lock, started + std::chrono::milliseconds(timeout_ms), mine)) {
          ++sl.timed_out;
          // Give the turn up: later tickets must not wait for this one.
          skip_locked(sl, ticket);
          return Status(StatusCode::kDeadlineExceeded,
                        "the run took longer than its time limit of " + std::to_string(timeout_ms) +
                            " ms waiting for one of the session's " + std::to_string(limit) +
                            " run slots (session option max_concurrent_runs)");
        }
      } else {
        sl.cv.wait(lock, mine);
      }
      ++sl.serving;
      advance_locked(sl);
    }
    ++sl.running;
    sl.most = std::max(sl.most, sl.running);
    if (limit > 0) sl.cv.notify_all();  // the next ticket may also fit
    return RunSlot(&sl);
  }
  RunSlot(RunSlot&& o) noexcept : sl_(std::exchange(o.sl_, nullptr)) {}
  RunSlot& operator=(RunSlot&&) = delete;
  ~RunSlot() {
    if (!sl_) return;
    std::lock_guard lock(sl_->mu);
    --sl_->running;
    sl_->cv.notify_all();
  }

 private:
  explicit RunSlot(SessionImpl::Slots* sl) : sl_(sl) {}
  // Tickets given up by waiters that timed out are skipped when their turn comes.
  static void skip_locked(SessionImpl::Slots& sl, uint64_t ticket) {
    sl.abandoned.insert(ticket);
    advance_locked(sl);
    sl.cv.notify_all();
  }
  static void advance_locked(SessionImpl::Slots& sl) {
    while (sl.abandoned.erase(sl.serving)) ++sl.serving;
  }
  SessionImpl::Slots* sl_;
};

// Session::run_values; `own_outputs` = false lets outputs alias inputs and weights (for
// a caller that copies them at once: the worker of process isolation).
Result<NamedValues> run_session(const SessionImpl& s, const NamedValues& inputs, const RunOptions& options,
                                bool own_outputs) {
  if (options.timeout_ms < -1)
    return invalid_argument("bad run option timeout_ms " + std::to_string(options.timeout_ms) + ": expected -1 (the session's), 0 (none) or a positive number");
  std::vector<Value> bound(s.all_inputs.size());
  std::vector<bool> given(s.all_inputs.size(), false);
  std::unordered_set<const Buffer*> foreign;  // buffers the run must not hand back
  for (const auto& [name, value] : inputs) {
    size_t idx = 0;
    while (idx < s.all_inputs.size() && (s.all_inputs[idx].name != name || !s.input_bindable[idx])) ++idx;
    if (idx == s.all_inputs.size()) {
      std::string names;
      for (const auto& io : s.inputs) names += (names.empty() ? "" : ", ") + io.name;
      return invalid_argument("unknown input '" + name + "' (the model's inputs are: " + names + ")");
    }
    if (given[idx]) return invalid_argument("input '" + name + "' is given twice");
    BH_RETURN_IF_ERROR(check_input(s.all_inputs[idx], value));
    given[idx] = true;
    bound[idx] = value;
    if (value.is_tensor() && value.tensor.buffer()) foreign.insert(value.tensor.buffer().get());
    for (auto& t : value.sequence)
      if (t.buffer()) foreign.insert(t.buffer().get());
  }
  for (size_t i = 0; i < s.all_inputs.size(); ++i)
    if (!given[i] && s.input_required[i])
      return invalid_argument("missing input '" + s.all_inputs[i].name + "' (" + s.all_inputs[i].type_string + ")");

  std::vector<size_t> wanted;
  if (options.outputs.empty()) {
    for (size_t i = 0; i < s.outputs.size(); ++i) wanted.push_back(i);
  } else {
    for (const auto& n : options.outputs) {
      size_t i = 0;
      while (i < s.outputs.size() && s.outputs[i].name != n) ++i;
      if (i == s.outputs.size()) return invalid_argument("unknown output '" + n + "'");
      wanted.push_back(i);
    }
  }
  const int64_t timeout = options.timeout_ms >= 0 ? options.timeout_ms : s.options.run_timeout_ms;
  const auto started = exec::RunLimits::Clock::now();
  BH_ASSIGN_OR_RETURN(RunSlot slot, RunSlot::acquire(s, timeout, started));
  if (s.remote) {
    std::vector<std::string> names;
    for (size_t i : wanted) names.push_back(s.outputs[i].name);
    int64_t remote_timeout = options.timeout_ms;
    if (timeout > 0) {  // what the wait for a slot left of it
      auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(exec::RunLimits::Clock::now() - started).count();
      remote_timeout = std::max<int64_t>(1, timeout - spent);
    }
    // A pipeline's next isolated session: the outputs go into regions lent to it.
    const SessionImpl* next = options.outputs_for ? SessionAccess::impl(*options.outputs_for) : nullptr;
    const uint64_t outputs_for = next && next->remote ? next->remote->lend_id() : 0;
    return s.remote->run(inputs, names, options.profile, remote_timeout, outputs_for);
  }

  exec::RunLimits limits;
  if (timeout > 0) {
    limits.timeout_ms = timeout;
    limits.deadline = started + std::chrono::milliseconds(timeout);  // the wait for a slot counts
  }
  limits.max_tensor_bytes = s.options.max_tensor_bytes;
  limits.max_loop_iterations = s.options.max_loop_iterations;
  exec::RunContext rc;
  if (limits.any()) rc.limits = &limits;
  rc.opts = &s.compile_options;
  rc.router = s.env->router().get();
  rc.threads = s.threads_probe ? s.threads_probe->next_run() : s.compile_options.threads;
  const bool timed = s.threads_probe && !s.threads_probe->decided();
  std::vector<exec::NodeTiming> timings;
  if (options.profile) rc.profile = &timings;
  std::vector<std::shared_ptr<void>> guards;
  const auto run_start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (auto& p : s.compile_options.placements) guards.push_back(p.device->enter_run(rc.threads));
  auto outs = exec::run(*s.plan, std::move(bound), rc);
  guards.clear();
  if (!outs.is_ok()) return outs.status();
  if (timed &&
      s.threads_probe->ran(rc.threads,
                           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run_start).count())) {
    // Runs at two thread counts allocate differently (oneDNN's scratch is per thread), so
    // the arena plan gave up while they alternated: plan again for the count kept.
    for (const auto& p : s.compile_options.placements)
      if (auto* planned = dynamic_cast<PlannedHostAllocator*>(p.allocator.get())) planned->restart_planning();
  }
  if (options.profile)
    for (auto& t : timings) options.profile->push_back({t.node->name, t.node->op_type, t.ms, t.shapes});

  NamedValues result;
  for (size_t i : wanted) {
    Value v = (*outs)[i];
    // Outputs are the caller's (and CPU-readable: exec::run copied device-local ones to
    // host memory): never an alias of an input or of the model's weights.
    auto own = [&](Tensor& t) -> Status {
      if (!own_outputs) return Status::ok();
      if (t.buffer() && (foreign.count(t.buffer().get()) || s.constant_buffers.count(t.buffer().get()))) t = t.clone_host();
      else if (t.dtype() == DataType::kString) t = t.clone_host();
      return Status::ok();
    };
    if (v.is_tensor()) BH_RETURN_IF_ERROR(own(v.tensor));
    for (auto& t : v.sequence) BH_RETURN_IF_ERROR(own(t));
    result.emplace_back(s.outputs[i].name, std::move(v));
  }
  return result;
}

}  // namespace

Result<NamedValues> Session::run_values(const NamedValues& inputs, const RunOptions& options) const {
  if (!impl_) return invalid_argument("run on an empty Session");
  return run_session(*impl_, inputs, options, true);
}

isolate::ModelInfo isolate::describe_session(const Session& session) {
  const SessionImpl& s = *SessionAccess::impl(session);
  return {s.all_inputs, s.input_required, s.input_bindable, s.outputs, session.placement(), session.precision()};
}

Result<NamedValues> isolate::run_for_transfer(const Session& session, const NamedValues& inputs, const RunOptions& options,
                                              std::shared_ptr<SurvivorRegion> survivors) {
  if (!session.valid()) return invalid_argument("run on an empty Session");
  const SessionImpl& s = *SessionAccess::impl(session);
  // The first planned host allocator (the CPU placement's) places the outputs; the
  // region is withdrawn afterwards in case no run took it (a run overlapping another).
  std::shared_ptr<PlannedHostAllocator> host;
  if (survivors)
    for (auto& p : s.compile_options.placements)
      if ((host = std::dynamic_pointer_cast<PlannedHostAllocator>(p.allocator))) break;
  if (host) host->set_survivor_region(std::move(survivors));
  auto r = run_session(s, inputs, options, false);
  if (host) host->set_survivor_region(nullptr);
  return r;
}

Result<NamedTensors> Session::run(const NamedTensors& inputs, const RunOptions& options) const {
  NamedValues in;
  in.reserve(inputs.size());
  for (const auto& [n, t] : inputs) in.emplace_back(n, Value(t));
  BH_ASSIGN_OR_RETURN(auto outs, run_values(in, options));
  NamedTensors r;
  for (auto& [n, v] : outs) {
    if (!v.is_tensor()) return unsupported("output '" + n + "' is " + v.describe() + ", not a tensor: use run_values()");
    r.emplace_back(n, std::move(v.tensor));
  }
  return r;
}

}  // namespace bulkhead
