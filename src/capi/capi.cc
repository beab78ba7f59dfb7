// The C API (include/bulkhead/bulkhead.h) over the C++ one. Every entry point checks its
// handles and pointers, turns a Status into a BhStatus*, and catches every exception:
// none crosses into C. Out-parameters are written only after everything that can fail.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <filesystem>
#include <new>

#include "capi/handles.h"
#include "backend/plugin_host.h"
#include "common/sizes.h"
#include "session/env_impl.h"

namespace bulkhead::capi {

const char* handle_kind_name(HandleKind kind) {
  switch (kind) {
    case HandleKind::kStatus: return "status";
    case HandleKind::kEnv: return "environment";
    case HandleKind::kSessionOptions: return "session options";
    case HandleKind::kSession: return "session";
    case HandleKind::kRunOptions: return "run options";
    case HandleKind::kTensor: return "tensor";
    case HandleKind::kDeviceList: return "device list";
  }
  return "unknown";
}

namespace {

constexpr size_t kQuarantine = 1024;

struct Quarantine {
  std::mutex mu;
  std::deque<std::pair<HandleHeader*, void (*)(HandleHeader*)>> shells;
};

Quarantine& quarantine() {
  // Never destroyed: handles may be released while the process exits.
  static Quarantine* q = new Quarantine;
  return *q;
}

}  // namespace

void retire(HandleHeader* header, void (*free_shell)(HandleHeader*)) {
  header->state = HandleHeader::kReleased;
  std::pair<HandleHeader*, void (*)(HandleHeader*)> oldest{nullptr, nullptr};
  {
    Quarantine& q = quarantine();
    std::lock_guard<std::mutex> lock(q.mu);
    q.shells.emplace_back(header, free_shell);
    if (q.shells.size() > kQuarantine) {
      oldest = q.shells.front();
      q.shells.pop_front();
    }
  }
  if (oldest.first) oldest.second(oldest.first);
}

namespace {

// ---- statuses -----------------------------------------------------------------------

// Returned when even a status cannot be allocated; release_status ignores it.
BhStatus g_out_of_memory = [] {
  BhStatus s;
  s.code = BH_RESOURCE_EXHAUSTED;
  return s;
}();
const char kOutOfMemoryMessage[] = "out of memory";

BhStatus* make_status(BhStatusCode code, const std::string& message) noexcept {
  try {
    auto* s = new BhStatus;
    s->code = code;
    s->message = message;
    return s;
  } catch (...) {
    return &g_out_of_memory;
  }
}

BhStatus* to_c(const Status& s) {
  if (s.is_ok()) return nullptr;
  return make_status(static_cast<BhStatusCode>(s.code()), s.message());
}

// Runs `body` (returning a Status), catching everything.
template <typename F>
BhStatus* guard(const char* fn, F&& body) noexcept {
  try {
    return to_c(body());
  } catch (const std::bad_alloc&) {
    return make_status(BH_RESOURCE_EXHAUSTED, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return make_status(BH_INTERNAL, std::string(fn) + ": " + e.what());
  } catch (...) {
    return make_status(BH_INTERNAL, std::string(fn) + ": an unknown exception");
  }
}

// ---- handle checks --------------------------------------------------------------------

template <typename T> constexpr HandleKind kind_of();
template <> constexpr HandleKind kind_of<BhStatus>() { return HandleKind::kStatus; }
template <> constexpr HandleKind kind_of<BhEnv>() { return HandleKind::kEnv; }
template <> constexpr HandleKind kind_of<BhSessionOptions>() { return HandleKind::kSessionOptions; }
template <> constexpr HandleKind kind_of<BhSession>() { return HandleKind::kSession; }
template <> constexpr HandleKind kind_of<BhRunOptions>() { return HandleKind::kRunOptions; }
template <> constexpr HandleKind kind_of<BhTensor>() { return HandleKind::kTensor; }
template <> constexpr HandleKind kind_of<BhDeviceList>() { return HandleKind::kDeviceList; }

bool known_kind(HandleKind k) { return k >= HandleKind::kStatus && k <= HandleKind::kDeviceList; }

template <typename T>
Status check_handle(const T* h, const char* fn, const char* arg) {
  const char* want = handle_kind_name(kind_of<T>());
  if (!h) return invalid_argument(std::string(fn) + ": '" + arg + "' is NULL");
  const auto* hdr = reinterpret_cast<const HandleHeader*>(h);
  bool live = hdr->state == HandleHeader::kLive, dead = hdr->state == HandleHeader::kReleased;
  if ((live || dead) && known_kind(hdr->kind)) {
    if (hdr->kind == kind_of<T>()) {
      if (live) return Status::ok();
      return invalid_argument(std::string(fn) + ": '" + arg + "' is a released " + want + " handle");
    }
    return invalid_argument(std::string(fn) + ": '" + arg + "' is " + (dead ? "a released " : "a ") +
                            handle_kind_name(hdr->kind) + " handle, not a " + want + " handle");
  }
  return invalid_argument(std::string(fn) + ": '" + arg + "' is not a bulkhead " + want + " handle");
}

#define BH_CHECK_HANDLE(h, fn) BH_RETURN_IF_ERROR(check_handle(h, fn, #h))
#define BH_CHECK_OUT(p, fn) \
  if (!(p)) return invalid_argument(std::string(fn) + ": out-parameter '" #p "' is NULL")
#define BH_CHECK_STRING(p, fn) \
  if (!(p)) return invalid_argument(std::string(fn) + ": '" #p "' is NULL")

// True for a live handle of kind T (release functions: silently ignore anything else).
template <typename T>
bool releasable(const T* h) {
  if (!h) return false;
  const auto* hdr = reinterpret_cast<const HandleHeader*>(h);
  return hdr->state == HandleHeader::kLive && hdr->kind == kind_of<T>();
}

template <typename T>
void free_shell(HandleHeader* h) {
  delete reinterpret_cast<T*>(h);
}

// ---- shapes and types -------------------------------------------------------------------

// A C caller may pass any integer as an enum; loading an out-of-range value through the
// C++ enum type is undefined, so enum arguments are read as their bytes.
template <typename E>
int raw_enum(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int>(v);
}

bool valid_type(int t) { return t != BH_TYPE_UNDEFINED && dtype_is_known(static_cast<int32_t>(t)); }

Result<Shape> make_shape(const int64_t* dims, size_t rank, const char* fn) {
  constexpr size_t kMaxRank = 64;
  if (rank > kMaxRank)
    return invalid_argument(std::string(fn) + ": rank " + std::to_string(rank) + " is above the most bulkhead takes (64)");
  if (rank && !dims) return invalid_argument(std::string(fn) + ": 'dims' is NULL for rank " + std::to_string(rank));
  Shape s(dims, dims + rank);
  for (size_t i = 0; i < rank; ++i)
    if (s[i] < 0)
      return invalid_argument(std::string(fn) + ": dimension " + std::to_string(i) + " is " + std::to_string(s[i]) +
                              " (dimensions are >= 0)");
  return s;
}

// The element type (numeric: strings have their own constructor) and shape a C caller
// gave `fn`, checked. The type by reference, read with raw_enum: a copy of an
// out-of-range enum would already be the undefined load raw_enum avoids.
Result<std::pair<DataType, Shape>> numeric_tensor_args(const BhElementType& type_arg, const int64_t* dims, size_t rank,
                                                      const char* fn) {
  const int type = raw_enum(type_arg);
  if (!valid_type(type)) return invalid_argument(std::string(fn) + ": element type " + std::to_string(type) + " is unknown");
  if (type == BH_TYPE_STRING)
    return invalid_argument(std::string(fn) + ": string tensors are made with create_string_tensor");
  BH_ASSIGN_OR_RETURN(Shape shape, make_shape(dims, rank, fn));
  return std::make_pair(static_cast<DataType>(type), std::move(shape));
}

// Memory lent by the caller (create_tensor_borrowed): handed back through its callback.
class LentMemory final : public Allocator {
 public:
  LentMemory(BhReleaseFn fn, void* user) : fn_(fn), user_(user) {}
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return "caller memory"; }
  Result<std::shared_ptr<Buffer>> allocate(size_t, size_t) override {
    return Status(StatusCode::kFailedPrecondition, "memory lent by the caller cannot allocate");
  }
  void release(void* data, void*, size_t) override {
    if (fn_) fn_(user_, data);
  }

 private:
  Domain domain_ = Domain::host();
  BhReleaseFn fn_;
  void* user_;
};

BhTensor* new_tensor(Tensor t) {
  auto* h = new BhTensor;
  h->device = t.domain().device_name();
  h->tensor = std::move(t);
  return h;
}

// ---- the process-isolation worker ------------------------------------------------------

bool is_executable(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// The worker program (bulkhead-worker, else bulkhead) beside this library: in its build
// folder, or installed in ../bin.
std::string worker_beside_library() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&bh_get_api), &info) || !info.dli_fname) return {};
  std::error_code ec;
  std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return {};
  for (const auto& candidate : {lib.parent_path() / "bulkhead-worker", lib.parent_path().parent_path() / "bin" / "bulkhead-worker",
                                 lib.parent_path() / "bulkhead", lib.parent_path().parent_path() / "bin" / "bulkhead"})
    if (is_executable(candidate.string())) return candidate.string();
  return {};
}

SessionOptions effective(const BhSessionOptions* o) {
  SessionOptions opts = o ? o->options : SessionOptions{};
  if (opts.isolation == "process" && opts.worker_binary.empty()) {
    const char* env = std::getenv("BULKHEAD_WORKER");
    if (!env || !*env) opts.worker_binary = worker_beside_library();
  }
  return opts;
}

Status make_session(BhEnv* env, const BhSessionOptions* options, Result<Session> loaded, BhSession** out) {
  BH_RETURN_IF_ERROR(loaded.status());
  auto h = std::make_unique<BhSession>();
  h->session = std::move(loaded).value();
  h->placement = h->session->placement();
  *out = h.release();
  return Status::ok();
}

const IoInfo* io_at(const BhSession* s, const BhIoSide& side_arg, size_t index, const char* fn, Status* error) {
  const int side = raw_enum(side_arg);
  if (side != BH_INPUT && side != BH_OUTPUT) {
    *error = invalid_argument(std::string(fn) + ": side " + std::to_string(side) +
                              " is neither BH_INPUT nor BH_OUTPUT");
    return nullptr;
  }
  const auto& list = side == BH_INPUT ? s->session->inputs() : s->session->outputs();
  if (index >= list.size()) {
    *error = invalid_argument(std::string(fn) + ": index " + std::to_string(index) + " is out of range: the session has " +
                              std::to_string(list.size()) + (side == BH_INPUT ? " inputs" : " outputs"));
    return nullptr;
  }
  return &list[index];
}

#define BH_IO_AT(var, s, side, index, fn)               \
  Status var##_error;                                   \
  const IoInfo* var = io_at(s, side, index, fn, &var##_error); \
  if (!var) return var##_error

// ---- the table's functions -------------------------------------------------------------

BhStatusCode status_code(const BhStatus* s) {
  if (!s) return BH_OK;
  return releasable(s) || s == &g_out_of_memory ? s->code : BH_INVALID_ARGUMENT;
}

const char* status_message(const BhStatus* s) {
  if (!s) return "";
  if (s == &g_out_of_memory) return kOutOfMemoryMessage;
  if (!releasable(s)) return "status_message: not a live status handle";
  return s->message.c_str();
}

void release_status(BhStatus* s) {
  if (s == &g_out_of_memory || !releasable(s)) return;
  s->message = std::string();
  retire(&s->header, free_shell<BhStatus>);
}

BhStatus* create_env(BhEnv** out) {
  return guard("create_env", [&]() -> Status {
    BH_CHECK_OUT(out, "create_env");
    auto h = std::make_unique<BhEnv>();
    h->env.emplace();
    *out = h.release();
    return Status::ok();
  });
}

void release_env(BhEnv* env) {
  if (!releasable(env)) return;
  try {
    env->env.reset();
  } catch (...) {
  }
  retire(&env->header, free_shell<BhEnv>);
}

BhStatus* env_backends(const BhEnv* env, const char** out) {
  return guard("env_backends", [&]() -> Status {
    BH_CHECK_HANDLE(env, "env_backends");
    BH_CHECK_OUT(out, "env_backends");
    std::string names;
    for (const auto& b : env->env->backends()) names += (names.empty() ? "" : ",") + b;
    auto* e = const_cast<BhEnv*>(env);
    std::lock_guard lock(e->mu);
    auto it = std::find(e->backend_lists.begin(), e->backend_lists.end(), names);
    if (it == e->backend_lists.end()) it = e->backend_lists.insert(e->backend_lists.end(), std::move(names));
    *out = it->c_str();
    return Status::ok();
  });
}

BhStatus* env_load_backend(BhEnv* env, const char* path, const char* options) {
  return guard("env_load_backend", [&]() -> Status {
    BH_CHECK_HANDLE(env, "env_load_backend");
    if (!path) return invalid_argument("env_load_backend: path is NULL");
    plugin::LoadRequest r;
    r.path = path;
    r.options = options ? options : "";
    r.registered_by = "C API (env_load_backend)";
    return env->env->impl()->load_backend(r);
  });
}

BhStatus* env_add_backend_library(BhEnv* env, BhBackendEntryFn entry, const char* label, const char* options) {
  return guard("env_add_backend_library", [&]() -> Status {
    BH_CHECK_HANDLE(env, "env_add_backend_library");
    if (!entry) return invalid_argument("env_add_backend_library: entry is NULL");
    plugin::LoadRequest r;
    r.entry = entry;
    r.label = label ? label : "";
    r.options = options ? options : "";
    r.registered_by = "host (C API env_add_backend_library)";
    return env->env->impl()->load_backend(r);
  });
}

BhStatus* env_unload_backend(BhEnv* env, const char* name) {
  return guard("env_unload_backend", [&]() -> Status {
    BH_CHECK_HANDLE(env, "env_unload_backend");
    if (!name) return invalid_argument("env_unload_backend: name is NULL");
    return env->env->unload_backend(name);
  });
}

BhStatus* env_devices(const BhEnv* env, BhDeviceList** out) {
  return guard("env_devices", [&]() -> Status {
    BH_CHECK_HANDLE(env, "env_devices");
    BH_CHECK_OUT(out, "env_devices");
    auto list = std::make_unique<BhDeviceList>();
    for (const auto& d : env->env->devices()) {
      std::string description = d.name;
      if (!d.driver.empty()) description += " (" + d.driver + ")";
      list->entries.push_back({d.backend + ":" + std::to_string(d.ordinal), d.backend, description, d.submit_policy});
    }
    *out = list.release();
    return Status::ok();
  });
}

BhStatus* env_open_device_count(const BhEnv* env, size_t* out) {
  return guard("env_open_device_count", [&]() -> Status {
    BH_CHECK_HANDLE(env, "env_open_device_count");
    BH_CHECK_OUT(out, "env_open_device_count");
    *out = static_cast<size_t>(env->env->open_device_count());
    return Status::ok();
  });
}

size_t device_list_count(const BhDeviceList* list) { return releasable(list) ? list->entries.size() : 0; }

BhStatus* device_list_get(const BhDeviceList* list, size_t index, const char** name, const char** backend,
                          const char** description, const char** submit_policy) {
  return guard("device_list_get", [&]() -> Status {
    BH_CHECK_HANDLE(list, "device_list_get");
    if (index >= list->entries.size())
      return invalid_argument("device_list_get: index " + std::to_string(index) + " is out of range: the list has " +
                              std::to_string(list->entries.size()) + " devices");
    const auto& e = list->entries[index];
    if (name) *name = e.name.c_str();
    if (backend) *backend = e.backend.c_str();
    if (description) *description = e.description.c_str();
    if (submit_policy) *submit_policy = e.submit_policy.c_str();
    return Status::ok();
  });
}

void release_device_list(BhDeviceList* list) {
  if (!releasable(list)) return;
  list->entries.clear();
  retire(&list->header, free_shell<BhDeviceList>);
}

BhStatus* create_session_options(BhSessionOptions** out) {
  return guard("create_session_options", [&]() -> Status {
    BH_CHECK_OUT(out, "create_session_options");
    *out = new BhSessionOptions;
    return Status::ok();
  });
}

void release_session_options(BhSessionOptions* o) {
  if (!releasable(o)) return;
  o->options = SessionOptions{};
  retire(&o->header, free_shell<BhSessionOptions>);
}

// Applies `change` to a copy of the options and keeps it only when it validates.
template <typename F>
BhStatus* set_option(BhSessionOptions* o, const char* fn, F&& change) {
  return guard(fn, [&]() -> Status {
    BH_RETURN_IF_ERROR(check_handle(o, fn, "options"));
    SessionOptions copy = o->options;
    BH_RETURN_IF_ERROR(change(copy));
    BH_RETURN_IF_ERROR(copy.validate().with_context(std::string(fn) + ": "));
    o->options = std::move(copy);
    return Status::ok();
  });
}

BhStatus* session_options_set_devices(BhSessionOptions* o, const char* devices) {
  return set_option(o, "session_options_set_devices", [&](SessionOptions& c) -> Status {
    BH_CHECK_STRING(devices, "session_options_set_devices");
    if (!*devices) return invalid_argument("session_options_set_devices: 'devices' is empty");
    return c.apply(std::string("devices=") + devices);
  });
}

BhStatus* session_options_set_threads(BhSessionOptions* o, int threads) {
  return set_option(o, "session_options_set_threads", [&](SessionOptions& c) { c.threads = threads; return Status::ok(); });
}

BhStatus* session_options_set_optimization_level(BhSessionOptions* o, int level) {
  return set_option(o, "session_options_set_optimization_level", [&](SessionOptions& c) {
    c.optimization_level = level;
    return Status::ok();
  });
}

BhStatus* session_options_set_graph_capture(BhSessionOptions* o, int enabled) {
  return set_option(o, "session_options_set_graph_capture", [&](SessionOptions& c) -> Status {
    if (enabled != 0 && enabled != 1)
      return invalid_argument("session_options_set_graph_capture: expected 0 or 1, got " + std::to_string(enabled));
    c.graph_capture = enabled == 1;
    return Status::ok();
  });
}

BhStatus* session_options_set_submit_policy(BhSessionOptions* o, const char* policy) {
  return set_option(o, "session_options_set_submit_policy", [&](SessionOptions& c) -> Status {
    BH_CHECK_STRING(policy, "session_options_set_submit_policy");
    c.submit_policy = policy;  // checked by each GPU device when a session opens on it
    return Status::ok();
  });
}

BhStatus* session_options_set_isolation(BhSessionOptions* o, const char* isolation) {
  return set_option(o, "session_options_set_isolation", [&](SessionOptions& c) -> Status {
    BH_CHECK_STRING(isolation, "session_options_set_isolation");
    c.isolation = isolation;
    return Status::ok();
  });
}

BhStatus* session_options_set_worker_timeout_ms(BhSessionOptions* o, int64_t ms) {
  return set_option(o, "session_options_set_worker_timeout_ms", [&](SessionOptions& c) -> Status {
    if (ms <= 0 || ms > INT32_MAX)
      return invalid_argument("session_options_set_worker_timeout_ms: expected 1.." + std::to_string(INT32_MAX) +
                              " milliseconds, got " + std::to_string(ms));
    c.worker_timeout_ms = static_cast<int>(ms);
    return Status::ok();
  });
}

BhStatus* session_options_set_worker_binary(BhSessionOptions* o, const char* path) {
  return set_option(o, "session_options_set_worker_binary", [&](SessionOptions& c) -> Status {
    BH_CHECK_STRING(path, "session_options_set_worker_binary");
    c.worker_binary = path;
    return Status::ok();
  });
}

BhStatus* session_options_set_max_file_bytes(BhSessionOptions* o, uint64_t bytes) {
  return set_option(o, "session_options_set_max_file_bytes", [&](SessionOptions& c) -> Status {
    c.max_file_bytes = bytes ? bytes : SessionOptions{}.max_file_bytes;
    return Status::ok();
  });
}

BhStatus* session_options_set_max_tensor_bytes(BhSessionOptions* o, uint64_t bytes) {
  return set_option(o, "session_options_set_max_tensor_bytes", [&](SessionOptions& c) {
    c.max_tensor_bytes = bytes;
    return Status::ok();
  });
}

BhStatus* session_options_set_max_loop_iterations(BhSessionOptions* o, int64_t n) {
  return set_option(o, "session_options_set_max_loop_iterations", [&](SessionOptions& c) {
    c.max_loop_iterations = n;
    return Status::ok();
  });
}

BhStatus* session_options_set_run_timeout_ms(BhSessionOptions* o, int64_t ms) {
  return set_option(o, "session_options_set_run_timeout_ms", [&](SessionOptions& c) {
    c.run_timeout_ms = ms;
    return Status::ok();
  });
}

BhStatus* session_options_apply(BhSessionOptions* o, const char* spec) {
  return set_option(o, "session_options_apply", [&](SessionOptions& c) -> Status {
    BH_CHECK_STRING(spec, "session_options_apply");
    return c.apply(spec);
  });
}

BhStatus* create_session(BhEnv* env, const char* path, const BhSessionOptions* options, BhSession** out) {
  return guard("create_session", [&]() -> Status {
    BH_CHECK_HANDLE(env, "create_session");
    BH_CHECK_STRING(path, "create_session");
    if (options) BH_CHECK_HANDLE(options, "create_session");
    BH_CHECK_OUT(out, "create_session");
    if (!*path) return invalid_argument("create_session: 'path' is empty");
    return make_session(env, options, env->env->load(path, effective(options)), out);
  });
}

BhStatus* create_session_from_bytes(BhEnv* env, const void* bytes, size_t size, const char* name,
                                    const BhSessionOptions* options, BhSession** out) {
  return guard("create_session_from_bytes", [&]() -> Status {
    BH_CHECK_HANDLE(env, "create_session_from_bytes");
    if (!bytes && size) return invalid_argument("create_session_from_bytes: 'bytes' is NULL");
    if (options) BH_CHECK_HANDLE(options, "create_session_from_bytes");
    BH_CHECK_OUT(out, "create_session_from_bytes");
    std::string data(static_cast<const char*>(bytes), size);
    return make_session(env, options, env->env->load_bytes(data, name ? name : "<bytes>", effective(options)), out);
  });
}

void release_session(BhSession* s) {
  if (!releasable(s)) return;
  try {
    s->session.reset();
  } catch (...) {
  }
  retire(&s->header, free_shell<BhSession>);
}

BhStatus* session_io_count(const BhSession* s, BhIoSide side, size_t* out) {
  return guard("session_io_count", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_io_count");
    BH_CHECK_OUT(out, "session_io_count");
    const int v = raw_enum(side);
    if (v != BH_INPUT && v != BH_OUTPUT)
      return invalid_argument("session_io_count: side " + std::to_string(v) + " is neither BH_INPUT nor BH_OUTPUT");
    *out = (v == BH_INPUT ? s->session->inputs() : s->session->outputs()).size();
    return Status::ok();
  });
}

BhStatus* session_io_name(const BhSession* s, BhIoSide side, size_t index, const char** out) {
  return guard("session_io_name", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_io_name");
    BH_CHECK_OUT(out, "session_io_name");
    BH_IO_AT(io, s, side, index, "session_io_name");
    *out = io->name.c_str();
    return Status::ok();
  });
}

BhStatus* session_io_element_type(const BhSession* s, BhIoSide side, size_t index, BhElementType* out) {
  return guard("session_io_element_type", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_io_element_type");
    BH_CHECK_OUT(out, "session_io_element_type");
    BH_IO_AT(io, s, side, index, "session_io_element_type");
    *out = static_cast<BhElementType>(io->dtype);
    return Status::ok();
  });
}

BhValueKind value_kind(const IoInfo& io) {
  if (io.is_tensor) return BH_VALUE_TENSOR;
  return io.type_string.rfind("optional<", 0) == 0 ? BH_VALUE_OPTIONAL : BH_VALUE_SEQUENCE;
}

BhStatus* session_io_value_kind(const BhSession* s, BhIoSide side, size_t index, BhValueKind* out) {
  return guard("session_io_value_kind", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_io_value_kind");
    BH_CHECK_OUT(out, "session_io_value_kind");
    BH_IO_AT(io, s, side, index, "session_io_value_kind");
    *out = value_kind(*io);
    return Status::ok();
  });
}

BhStatus* session_io_shape(const BhSession* s, BhIoSide side, size_t index, const int64_t** dims, int64_t* rank) {
  return guard("session_io_shape", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_io_shape");
    BH_CHECK_OUT(dims, "session_io_shape");
    BH_CHECK_OUT(rank, "session_io_shape");
    BH_IO_AT(io, s, side, index, "session_io_shape");
    *dims = io->has_shape ? io->shape.data() : nullptr;
    *rank = io->has_shape ? static_cast<int64_t>(io->shape.size()) : -1;
    return Status::ok();
  });
}

BhStatus* session_io_dim_name(const BhSession* s, BhIoSide side, size_t index, size_t dim, const char** out) {
  return guard("session_io_dim_name", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_io_dim_name");
    BH_CHECK_OUT(out, "session_io_dim_name");
    BH_IO_AT(io, s, side, index, "session_io_dim_name");
    if (!io->has_shape || dim >= io->shape.size())
      return invalid_argument("session_io_dim_name: '" + io->name + "' has " +
                              (io->has_shape ? std::to_string(io->shape.size()) + " dimensions" : std::string("no known rank")) +
                              ", no dimension " + std::to_string(dim));
    *out = dim < io->dim_names.size() ? io->dim_names[dim].c_str() : "";
    return Status::ok();
  });
}

BhStatus* session_placement_count(const BhSession* s, size_t* out) {
  return guard("session_placement_count", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_placement_count");
    BH_CHECK_OUT(out, "session_placement_count");
    *out = s->placement.size();
    return Status::ok();
  });
}

BhStatus* session_placement(const BhSession* s, size_t index, const char** device, int64_t* nodes) {
  return guard("session_placement", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_placement");
    BH_CHECK_OUT(device, "session_placement");
    BH_CHECK_OUT(nodes, "session_placement");
    if (index >= s->placement.size())
      return invalid_argument("session_placement: index " + std::to_string(index) + " is out of range: the session uses " +
                              std::to_string(s->placement.size()) + " devices");
    *device = s->placement[index].first.c_str();
    *nodes = s->placement[index].second;
    return Status::ok();
  });
}

BhStatus* session_memory_count(const BhSession* s, size_t* out) {
  return guard("session_memory_count", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_memory_count");
    BH_CHECK_OUT(out, "session_memory_count");
    *out = s->session->memory().size();
    return Status::ok();
  });
}

BhStatus* session_memory(const BhSession* cs, size_t index, const char** device, BhMemoryUsage* out) {
  return guard("session_memory", [&]() -> Status {
    BH_CHECK_HANDLE(cs, "session_memory");
    BH_CHECK_OUT(device, "session_memory");
    BH_CHECK_OUT(out, "session_memory");
    auto* s = const_cast<BhSession*>(cs);  // only its name cache changes
    auto use = s->session->memory();
    if (index >= use.size())
      return invalid_argument("session_memory: index " + std::to_string(index) + " is out of range: the session holds memory on " +
                              std::to_string(use.size()) + " devices");
    const auto& m = use[index];
    const char* name;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      name = s->memory_devices.insert(m.device).first->c_str();
    }
    *device = name;
    *out = BhMemoryUsage{m.stats.in_use, m.stats.peak, m.stats.cached, m.stats.arena, m.stats.arena_blocks};
    return Status::ok();
  });
}

BhStatus* session_worker_pid(const BhSession* s, int64_t* out) {
  return guard("session_worker_pid", [&]() -> Status {
    BH_CHECK_HANDLE(s, "session_worker_pid");
    BH_CHECK_OUT(out, "session_worker_pid");
    *out = s->session->worker_pid();
    return Status::ok();
  });
}

BhStatus* create_run_options(BhRunOptions** out) {
  return guard("create_run_options", [&]() -> Status {
    BH_CHECK_OUT(out, "create_run_options");
    *out = new BhRunOptions;
    return Status::ok();
  });
}

void release_run_options(BhRunOptions* o) {
  if (!releasable(o)) return;
  retire(&o->header, free_shell<BhRunOptions>);
}

BhStatus* run_options_set_timeout_ms(BhRunOptions* o, int64_t ms) {
  return guard("run_options_set_timeout_ms", [&]() -> Status {
    BH_RETURN_IF_ERROR(check_handle(o, "run_options_set_timeout_ms", "options"));
    if (ms < -1)
      return invalid_argument("run_options_set_timeout_ms: expected -1 (the session's), 0 (none) or a number of "
                              "milliseconds, got " + std::to_string(ms));
    o->timeout_ms = ms;
    return Status::ok();
  });
}

BhStatus* run_options_set_outputs_for(BhRunOptions* o, const BhSession* next) {
  return guard("run_options_set_outputs_for", [&]() -> Status {
    BH_RETURN_IF_ERROR(check_handle(o, "run_options_set_outputs_for", "options"));
    if (!next) {
      o->outputs_for.reset();
      return Status::ok();
    }
    BH_RETURN_IF_ERROR(check_handle(next, "run_options_set_outputs_for", "next"));
    o->outputs_for = *next->session;
    return Status::ok();
  });
}

BhStatus* run(const BhSession* session, const BhRunOptions* options, const char* const* input_names,
              const BhTensor* const* inputs, size_t input_count, const char* const* output_names, size_t output_count,
              BhTensor** outputs) {
  return guard("run", [&]() -> Status {
    BH_CHECK_HANDLE(session, "run");
    if (options) BH_CHECK_HANDLE(options, "run");
    if (input_count && !input_names) return invalid_argument("run: 'input_names' is NULL for " + std::to_string(input_count) + " inputs");
    if (input_count && !inputs) return invalid_argument("run: 'inputs' is NULL for " + std::to_string(input_count) + " inputs");
    if (output_count && !outputs) return invalid_argument("run: 'outputs' is NULL for " + std::to_string(output_count) + " outputs");
    const Session s = *session->session;  // a reference of its own for the run's length
    RunOptions ro;
    if (options) ro.timeout_ms = options->timeout_ms;
    if (options && options->outputs_for) ro.outputs_for = &*options->outputs_for;
    if (output_names) {
      if (output_count == 0) return invalid_argument("run: no outputs asked for (output_count is 0)");
      for (size_t i = 0; i < output_count; ++i) {
        if (!output_names[i]) return invalid_argument("run: output_names[" + std::to_string(i) + "] is NULL");
        ro.outputs.emplace_back(output_names[i]);
      }
    } else if (output_count != s.outputs().size()) {
      return invalid_argument("run: output_names is NULL (every output) but output_count is " + std::to_string(output_count) +
                              " and the model has " + std::to_string(s.outputs().size()) + " outputs");
    }
    NamedValues in;
    in.reserve(input_count);
    for (size_t i = 0; i < input_count; ++i) {
      if (!input_names[i]) return invalid_argument("run: input_names[" + std::to_string(i) + "] is NULL");
      if (!inputs[i]) {
        in.emplace_back(input_names[i], Value::none());
        continue;
      }
      std::string arg = "inputs[" + std::to_string(i) + "]";
      BH_RETURN_IF_ERROR(check_handle(inputs[i], "run", arg.c_str()));
      in.emplace_back(input_names[i], Value(inputs[i]->tensor));
    }
    BH_ASSIGN_OR_RETURN(NamedValues got, s.run_values(in, ro));
    if (got.size() != output_count)
      return internal_error("run: " + std::to_string(got.size()) + " outputs came back for " + std::to_string(output_count) + " asked");
    std::vector<std::unique_ptr<BhTensor>> made(output_count);
    for (size_t i = 0; i < output_count; ++i) {
      Value& v = got[i].second;
      if (v.is_none()) continue;
      if (v.is_sequence())
        return unsupported("run: output '" + got[i].first + "' is a sequence of tensors, which API version 1 does not return");
      made[i].reset(new_tensor(std::move(v.tensor)));  // run() hands back host tensors
    }
    for (size_t i = 0; i < output_count; ++i) outputs[i] = made[i].release();
    return Status::ok();
  });
}

BhStatus* create_tensor(BhElementType type_arg, const int64_t* dims, size_t rank, BhTensor** out) {
  return guard("create_tensor", [&]() -> Status {
    BH_CHECK_OUT(out, "create_tensor");
    BH_ASSIGN_OR_RETURN(auto args, numeric_tensor_args(type_arg, dims, rank, "create_tensor"));
    auto& [dtype, shape] = args;
    BH_RETURN_IF_ERROR(tensor_nbytes(dtype, shape).status().with_context("create_tensor: "));
    auto alloc = HostAllocator::create("C API tensor");
    BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*alloc, dtype, std::move(shape)));
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    *out = new_tensor(std::move(t));
    return Status::ok();
  });
}

BhStatus* session_create_input_tensor(const BhSession* session, BhElementType type_arg, const int64_t* dims, size_t rank,
                                      BhTensor** out) {
  return guard("session_create_input_tensor", [&]() -> Status {
    BH_CHECK_HANDLE(session, "session_create_input_tensor");
    BH_CHECK_OUT(out, "session_create_input_tensor");
    BH_ASSIGN_OR_RETURN(auto args, numeric_tensor_args(type_arg, dims, rank, "session_create_input_tensor"));
    Result<Tensor> t = session->session->allocate_input(args.first, std::move(args.second));
    if (!t.is_ok()) return t.status().with_context("session_create_input_tensor: ");
    if (t->nbytes()) std::memset(t->raw(), 0, t->nbytes());
    *out = new_tensor(std::move(t).value());
    return Status::ok();
  });
}

BhStatus* create_tensor_borrowed(BhElementType type_arg, const int64_t* dims, size_t rank, void* data, size_t size,
                                 BhReleaseFn release, void* user_data, BhTensor** out) {
  return guard("create_tensor_borrowed", [&]() -> Status {
    BH_CHECK_OUT(out, "create_tensor_borrowed");
    BH_ASSIGN_OR_RETURN(auto args, numeric_tensor_args(type_arg, dims, rank, "create_tensor_borrowed"));
    auto& [dtype, shape] = args;
    BH_ASSIGN_OR_RETURN(size_t want, tensor_nbytes(dtype, shape));
    if (size != want)
      return invalid_argument("create_tensor_borrowed: " + dtype_name(dtype) + shape_to_string(shape) + " needs " +
                              std::to_string(want) + " bytes, 'size' is " + std::to_string(size));
    if (!data && size) return invalid_argument("create_tensor_borrowed: 'data' is NULL");
    size_t align = dtype_size(dtype);
    if (data && reinterpret_cast<uintptr_t>(data) % align)
      return invalid_argument("create_tensor_borrowed: 'data' is not aligned to " + std::to_string(align) + " bytes, as " +
                              dtype_name(dtype) + " elements must be");
    auto h = std::make_unique<BhTensor>();
    auto lent = std::make_shared<LentMemory>(release, user_data);
    // From here nothing can fail: once the Buffer exists, its end calls `release`.
    auto buffer = std::make_shared<Buffer>(lent, Domain::host(), data, size);
    h->tensor = Tensor(dtype, std::move(shape), std::move(buffer));
    h->device = "host";
    *out = h.release();
    return Status::ok();
  });
}

BhStatus* create_string_tensor(const char* const* strings, size_t count, const int64_t* dims, size_t rank, BhTensor** out) {
  return guard("create_string_tensor", [&]() -> Status {
    BH_CHECK_OUT(out, "create_string_tensor");
    if (count && !strings) return invalid_argument("create_string_tensor: 'strings' is NULL");
    BH_ASSIGN_OR_RETURN(Shape shape, make_shape(dims, rank, "create_string_tensor"));
    BH_ASSIGN_OR_RETURN(int64_t n, tensor_numel(DataType::kString, shape));
    if (static_cast<uint64_t>(n) != count)
      return invalid_argument("create_string_tensor: shape " + shape_to_string(shape) + " holds " + std::to_string(n) +
                              " strings, 'count' is " + std::to_string(count));
    for (size_t i = 0; i < count; ++i)
      if (!strings[i]) return invalid_argument("create_string_tensor: strings[" + std::to_string(i) + "] is NULL");
    auto alloc = HostAllocator::create("C API tensor");
    BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*alloc, DataType::kString, std::move(shape)));
    for (size_t i = 0; i < count; ++i) t.strings()[i] = strings[i];
    *out = new_tensor(std::move(t));
    return Status::ok();
  });
}

BhStatus* create_device_tensor(BhEnv* env, const char* device, BhElementType type_arg, const int64_t* dims, size_t rank,
                               BhTensor** out) {
  return guard("create_device_tensor", [&]() -> Status {
    const int type = raw_enum(type_arg);
    BH_CHECK_HANDLE(env, "create_device_tensor");
    BH_CHECK_STRING(device, "create_device_tensor");
    BH_CHECK_OUT(out, "create_device_tensor");
    if (!valid_type(type) || type == BH_TYPE_STRING)
      return invalid_argument("create_device_tensor: element type " + std::to_string(type) +
                              (type == BH_TYPE_STRING ? " (string) lives on the host only" : " is unknown"));
    BH_ASSIGN_OR_RETURN(Shape shape, make_shape(dims, rank, "create_device_tensor"));
    BH_ASSIGN_OR_RETURN(Tensor t, env->env->impl()->allocate_zeroed(device, static_cast<DataType>(type), shape));
    *out = new_tensor(std::move(t));
    return Status::ok();
  });
}

void release_tensor(BhTensor* t) {
  if (!releasable(t)) return;
  try {
    t->tensor = Tensor();
  } catch (...) {
  }
  retire(&t->header, free_shell<BhTensor>);
}

BhStatus* tensor_element_type(const BhTensor* t, BhElementType* out) {
  return guard("tensor_element_type", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_element_type");
    BH_CHECK_OUT(out, "tensor_element_type");
    *out = static_cast<BhElementType>(t->tensor.dtype());
    return Status::ok();
  });
}

BhStatus* tensor_shape(const BhTensor* t, const int64_t** dims, size_t* rank) {
  return guard("tensor_shape", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_shape");
    BH_CHECK_OUT(dims, "tensor_shape");
    BH_CHECK_OUT(rank, "tensor_shape");
    *dims = t->tensor.shape().data();
    *rank = t->tensor.shape().size();
    return Status::ok();
  });
}

BhStatus* tensor_element_count(const BhTensor* t, int64_t* out) {
  return guard("tensor_element_count", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_element_count");
    BH_CHECK_OUT(out, "tensor_element_count");
    *out = t->tensor.numel();
    return Status::ok();
  });
}

BhStatus* tensor_byte_size(const BhTensor* t, size_t* out) {
  return guard("tensor_byte_size", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_byte_size");
    BH_CHECK_OUT(out, "tensor_byte_size");
    *out = t->tensor.dtype() == DataType::kString ? 0 : t->tensor.nbytes();
    return Status::ok();
  });
}

BhStatus* tensor_data(const BhTensor* t, void** out) {
  return guard("tensor_data", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_data");
    BH_CHECK_OUT(out, "tensor_data");
    if (t->tensor.dtype() == DataType::kString)
      return Status(StatusCode::kFailedPrecondition, "tensor_data: a string tensor's elements are read with tensor_string");
    if (!t->tensor.on_host())
      return Status(StatusCode::kFailedPrecondition, "tensor_data: the tensor lives in " + t->device +
                                                         " device-local memory; copy() it to a host tensor to read it");
    *out = t->tensor.raw();
    return Status::ok();
  });
}

BhStatus* tensor_location(const BhTensor* t, BhMemoryKind* kind, const char** device) {
  return guard("tensor_location", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_location");
    if (kind) {
      switch (t->tensor.domain().kind) {
        case MemoryKind::kHost: *kind = BH_MEMORY_HOST; break;
        case MemoryKind::kDeviceLocal: *kind = BH_MEMORY_DEVICE_LOCAL; break;
        case MemoryKind::kHostVisible: *kind = BH_MEMORY_HOST_VISIBLE; break;
      }
    }
    if (device) *device = t->device.c_str();
    return Status::ok();
  });
}

BhStatus* tensor_string(const BhTensor* t, size_t index, const char** data, size_t* size) {
  return guard("tensor_string", [&]() -> Status {
    BH_CHECK_HANDLE(t, "tensor_string");
    BH_CHECK_OUT(data, "tensor_string");
    BH_CHECK_OUT(size, "tensor_string");
    if (t->tensor.dtype() != DataType::kString)
      return invalid_argument("tensor_string: the tensor holds " + dtype_name(t->tensor.dtype()) + ", not strings");
    if (index >= static_cast<size_t>(t->tensor.numel()))
      return invalid_argument("tensor_string: index " + std::to_string(index) + " is out of range: the tensor has " +
                              std::to_string(t->tensor.numel()) + " strings");
    const std::string& s = t->tensor.strings()[index];
    *data = s.c_str();
    *size = s.size();
    return Status::ok();
  });
}

BhStatus* copy(BhEnv* env, const BhTensor* src, BhTensor* dst) {
  return guard("copy", [&]() -> Status {
    BH_CHECK_HANDLE(env, "copy");
    BH_CHECK_HANDLE(src, "copy");
    BH_CHECK_HANDLE(dst, "copy");
    if (src->tensor.dtype() != dst->tensor.dtype() || src->tensor.shape() != dst->tensor.shape())
      return invalid_argument("copy: from " + src->tensor.describe() + " to " + dst->tensor.describe() +
                              ": element types or shapes differ");
    if (src == dst) return Status::ok();
    return env->env->copy(src->tensor, dst->tensor);
  });
}

const char* version_string() { return bulkhead::version(); }

// ---- the table -------------------------------------------------------------------------

const BhApi kApi = {
    status_code,
    status_message,
    release_status,
    create_env,
    release_env,
    env_backends,
    env_devices,
    env_open_device_count,
    device_list_count,
    device_list_get,
    release_device_list,
    create_session_options,
    release_session_options,
    session_options_set_devices,
    session_options_set_threads,
    session_options_set_optimization_level,
    session_options_set_graph_capture,
    session_options_set_submit_policy,
    session_options_set_isolation,
    session_options_set_worker_timeout_ms,
    session_options_set_worker_binary,
    session_options_set_max_file_bytes,
    session_options_set_max_tensor_bytes,
    session_options_set_max_loop_iterations,
    session_options_set_run_timeout_ms,
    session_options_apply,
    create_session,
    create_session_from_bytes,
    release_session,
    session_io_count,
    session_io_name,
    session_io_element_type,
    session_io_value_kind,
    session_io_shape,
    session_io_dim_name,
    session_placement_count,
    session_placement,
    session_memory_count,
    session_memory,
    session_worker_pid,
    create_run_options,
    release_run_options,
    run_options_set_timeout_ms,
    run,
    create_tensor,
    create_tensor_borrowed,
    create_string_tensor,
    create_device_tensor,
    release_tensor,
    tensor_element_type,
    tensor_shape,
    tensor_element_count,
    tensor_byte_size,
    tensor_data,
    tensor_location,
    tensor_string,
    copy,
    version_string,
    env_load_backend,
    env_add_backend_library,
    env_unload_backend,
    session_create_input_tensor,
    run_options_set_outputs_for,
};

}  // namespace
}  // namespace bulkhead::capi

// ---- the released versions, pinned ----------------------------------------------------
// Version 1's members in their released order: inserting, removing or reordering a
// member of the table breaks every program built against it, and these checks.
#define BH_API_V1_MEMBERS(X)                                                                                        \
  X(status_code) X(status_message) X(release_status) X(create_env) X(release_env) X(env_backends) X(env_devices)   \
  X(env_open_device_count) X(device_list_count) X(device_list_get) X(release_device_list) X(create_session_options) \
  X(release_session_options) X(session_options_set_devices) X(session_options_set_threads)                         \
  X(session_options_set_optimization_level) X(session_options_set_graph_capture)                                   \
  X(session_options_set_submit_policy) X(session_options_set_isolation) X(session_options_set_worker_timeout_ms)   \
  X(session_options_set_worker_binary) X(session_options_set_max_file_bytes) X(session_options_set_max_tensor_bytes) \
  X(session_options_set_max_loop_iterations) X(session_options_set_run_timeout_ms) X(session_options_apply)        \
  X(create_session) X(create_session_from_bytes) X(release_session) X(session_io_count) X(session_io_name)         \
  X(session_io_element_type) X(session_io_value_kind) X(session_io_shape) X(session_io_dim_name)                   \
  X(session_placement_count) X(session_placement) X(session_memory_count) X(session_memory) X(session_worker_pid)  \
  X(create_run_options) X(release_run_options) X(run_options_set_timeout_ms) X(run) X(create_tensor)               \
  X(create_tensor_borrowed) X(create_string_tensor) X(create_device_tensor) X(release_tensor)                      \
  X(tensor_element_type) X(tensor_shape) X(tensor_element_count) X(tensor_byte_size) X(tensor_data)                \
  X(tensor_location) X(tensor_string) X(copy) X(version_string)

// Version 2 appends three members (backend plugins) after version 1's; version 3 two
// (hand-offs to worker processes without a copy).
#define BH_API_V2_MEMBERS(X) X(env_load_backend) X(env_add_backend_library) X(env_unload_backend)
#define BH_API_V3_MEMBERS(X) X(session_create_input_tensor) X(run_options_set_outputs_for)
namespace {
// Every member's index, version after version: a version's first member's index is the
// count of the versions before it.
enum BhApiIndex {
#define BH_INDEX(m) kAt_##m,
  BH_API_V1_MEMBERS(BH_INDEX) BH_API_V2_MEMBERS(BH_INDEX) BH_API_V3_MEMBERS(BH_INDEX)
#undef BH_INDEX
  kMembers
};
}  // namespace

static_assert(kAt_env_load_backend == 58, "API version 1 has 58 members");
static_assert(kAt_session_create_input_tensor == 61, "API version 2 has 61 members");
static_assert(kMembers == 63, "API version 3 has 63 members");
#define BH_PIN(m) \
  static_assert(offsetof(BhApi, m) == kAt_##m * sizeof(void*), "BhApi member '" #m "' moved: the table is append-only");
BH_API_V1_MEMBERS(BH_PIN)
BH_API_V2_MEMBERS(BH_PIN)
BH_API_V3_MEMBERS(BH_PIN)
#undef BH_PIN
static_assert(sizeof(BhApi) == kMembers * sizeof(void*), "BhApi's size changed without a new API version");

static_assert(BH_OK == 0 && BH_INVALID_ARGUMENT == 1 && BH_NOT_FOUND == 2 && BH_UNSUPPORTED == 3 && BH_INVALID_MODEL == 4 &&
              BH_FAILED_PRECONDITION == 5 && BH_RESOURCE_EXHAUSTED == 6 && BH_INTERNAL == 7 && BH_UNAVAILABLE == 8 &&
              BH_DEADLINE_EXCEEDED == 9, "status codes are part of the ABI");
static_assert(static_cast<int>(bulkhead::StatusCode::kDeadlineExceeded) == BH_DEADLINE_EXCEEDED &&
              static_cast<int>(bulkhead::StatusCode::kInvalidModel) == BH_INVALID_MODEL,
              "the C codes mirror bulkhead::StatusCode");
static_assert(sizeof(BhMemoryUsage) == 40 && offsetof(BhMemoryUsage, arena_blocks) == 32, "BhMemoryUsage is pinned");
static_assert(BH_TYPE_BFLOAT16 == 16 && BH_TYPE_UINT64 == 13 && BH_TYPE_STRING == 8, "element types follow ONNX");

extern "C" {

BH_EXPORT const BhApi* bh_get_api(uint32_t version) {
  return version >= 1 && version <= BH_API_VERSION ? &bulkhead::capi::kApi : nullptr;
}

BH_EXPORT uint32_t bh_api_version(void) { return BH_API_VERSION; }

}  // extern "C"
