// bulkhead's public C++ API: Env, Session, SessionOptions, RunOptions.
//
// Env: a registry of backends, the devices opened from them (reference-counted), and
// the copy router. Several Envs may live in one process; they share nothing. Env and
// Session are cheap handles to shared state: copying one shares it. All methods are
// thread-safe. A Session keeps its Env's state alive; destroying handles in any order,
// on any thread, is safe, and the last one to go tears down sessions → buffers →
// devices → backends (I4).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bulkhead/dtype.h"
#include "bulkhead/status.h"
#include "bulkhead/tensor.h"

namespace bulkhead {

class Backend;
struct DeviceInfo;
struct BackendOrigin;

struct SessionOptions {
  // Devices in order of preference, e.g. {"cpu"} or {"vulkan:0", "cpu"}: each node runs
  // on the first one that can run it.
  std::vector<std::string> devices = {"cpu"};
  // Intra-op threads for each run; 0 = the number of cores. A run is granted at most the
  // cores free when it starts (and at least one), whatever this asks for.
  int threads = 0;
  static constexpr int kMaxThreads = 1024;
  bool graph_capture = true;
  // GPU devices: how a run's dispatches are submitted — "single", "per-dispatch",
  // "split", "auto" or "auto:<bytes>[K|M|G]"; empty = the device's default (its quirks
  // table entry, or $BULKHEAD_VULKAN_SUBMIT). `bulkhead devices` shows each default.
  std::string submit_policy;
  // Graph optimisations before compilation: 0 = off; 1 = fold and fuse Conv chains
  // (BatchNormalization, activations, residual adds), drop Identity/Dropout
  // (exec/optimize.h); 2 (default) = 1, and on the CPU keep convolution chains in
  // oneDNN's channel-blocked layout, reordering only at their ends (exec/layout.h).
  int optimization_level = 2;
  // "in-process" (default) or "process": the session lives in a worker process (the
  // bulkhead program run as `bulkhead worker`); tensors cross through shared memory, and
  // a worker that crashes or hangs fails the run in progress with a clear error and is
  // replaced for the next one (I8).
  std::string isolation = "in-process";
  // Process isolation: a run not answered within this long fails and its worker is
  // killed. Loading the model in a worker is allowed max(this, 60 s).
  int worker_timeout_ms = 60000;
  // Process isolation: the program to start as the worker. Empty: $BULKHEAD_WORKER, else
  // this program when it is `bulkhead`, else a `bulkhead` beside it.
  std::string worker_binary;
  // The largest file bulkhead reads for this session: the model, and each of its
  // external data files (which must be regular files inside the model's folder).
  uint64_t max_file_bytes = uint64_t{64} << 30;
  // Limits on what one run may do, for models and inputs from sources one does not
  // trust; 0 = no limit (the default). A run that would pass one fails with an error
  // naming the node and the limit, and the session stays usable.
  // The largest tensor a run may create: an output, an intermediate or a kernel's scratch.
  uint64_t max_tensor_bytes = 0;
  // The most times one Loop or Scan node may run its body within one run.
  int64_t max_loop_iterations = 0;
  // The longest a run may take, in milliseconds (RunOptions::timeout_ms overrides it per
  // run). Checked before every node and every loop iteration: a node that has started
  // runs to its end, and a batch of work already submitted to a GPU is waited for, since
  // its memory cannot be given back while the device may still use it.
  int64_t run_timeout_ms = 0;
  // The most runs of this session that execute at once; 0 = no limit (the default). A
  // run beyond it waits for one to finish (in arrival order), within its time limit when
  // it has one, so a burst of callers costs at most this many runs' memory. Whatever the
  // limit, when the last of several overlapping runs ends the session gives the memory
  // the burst cached back to the system (Session::memory() counts it in `trimmed`).
  int max_concurrent_runs = 0;
  // Sessions of one Env share the immutable things their models have in common, by
  // content: initializers, constants folded at creation and weights packed for a kernel
  // (true, the default). Eight sessions of one model then hold its weights once; each
  // session's own memory is its arena and its execution state. Shared things are never
  // written after creation, are reference-counted, and go with the last session that
  // holds them; nothing is shared between Envs or with a worker process. false: the
  // session keeps private copies of everything.
  bool share_weights = true;
  // CPU: once a session has had no run open for this many milliseconds, the memory its
  // runs used (the planned arena, the cache) goes back to the system; its next run maps
  // it in again (det at 480x640: 28 MiB, ~10% of that one run; bench/README.md). A session
  // that runs more often than this keeps its arena, so steady-state runs allocate
  // nothing; sessions that mostly wait, such as a server's instances of one model, hold
  // their weights (shared) and state only. 0: whenever the last open run ends; -1: never.
  // Session::memory() counts what was given back in `trimmed`.
  int release_idle_after_ms = 5000;
  static constexpr int kMaxReleaseIdleAfterMs = 86'400'000;  // a day
  // true: as release_idle_after_ms = 0 (whenever a session's last open run ends).
  bool release_idle_memory = false;
  // CPU: a session whose every node has fewer than 16 M multiply-adds (ShuffleNet) times
  // its first runs at one thread and at `threads`, alternately, and keeps the faster for
  // every later run (true, the default): whether splitting nodes that small gains more
  // than it costs in traffic between the cores' caches depends on the machine (ShuffleNet
  // at 2 threads: 1.30x slower than at one on one 2-core machine, 1.38x faster on
  // another). Results do not depend on it. Session::threads() says what was kept.
  // false: always the threads asked for.
  bool one_thread_when_small = true;
  // The arithmetic of the CPU's convolutions and matrix products: "fp32" (the default)
  // or "bf16". With "bf16" (CPU sessions at optimization_level 2), every float32 Conv,
  // ConvTranspose, and MatMul/Gemm with constant weights runs on bfloat16 inputs and
  // weights with float32 sums: weights are converted once when the session is created,
  // activations between convolutions stay bfloat16 in the channel-blocked layout, and
  // everything else (element-wise ops, pooling, outputs) stays float32. bfloat16 keeps 8
  // significant bits: results differ from fp32 by about 1e-2 relative, so measure the
  // price on your model first (`bulkhead check MODEL --precision bf16` reports cosine,
  // max error and PSNR against fp32). Fast only on CPUs with bf16 units (AMX or
  // AVX512-BF16); elsewhere the session says so once (on stderr) and runs fp32.
  // Session::precision() tells what a session runs.
  std::string precision = "fp32";
  // Parses "devices=cpu;threads=2;graph_capture=0;optimization_level=1" style option strings (CLI, env vars);
  // also isolation=process, worker_timeout_ms=N, worker_binary=PATH, submit_policy=split,
  // max_file_bytes=N[K|M|G], max_tensor_bytes=N[K|M|G], max_loop_iterations=N, run_timeout_ms=N,
  // max_concurrent_runs=N, share_weights=0|1, release_idle_memory=0|1, release_idle_after_ms=N,
  // one_thread_when_small=0|1, precision=fp32|bf16.
  static Result<SessionOptions> parse(const std::string& spec);
  // Applies an option string of the same form onto these options: all or nothing.
  Status apply(const std::string& spec);
  // Whether every option holds a valid value (what loading a session checks first).
  Status validate() const;
};

// Time spent in one node during a profiled run.
struct NodeProfile {
  std::string node, op_type;
  double ms = 0;
  std::string shapes;  // first input -> first output
};

struct RunOptions {
  // Outputs to return, by name; empty = every graph output, in graph order.
  std::vector<std::string> outputs;
  // When set, receives the time of every node executed in this run (subgraph nodes
  // included). Owned by the caller. A session in a worker process (isolation "process")
  // adds three entries of op_type "(isolation)" for the hand-off: "inputs copied in",
  // "outputs copied out" (shapes: the MiB copied) and "messages and wake-ups".
  std::vector<NodeProfile>* profile = nullptr;
  // This run's time limit in milliseconds: -1 = the session's run_timeout_ms, 0 = none.
  int64_t timeout_ms = -1;
  // Pipelines of process-isolated sessions (F -> G): the session this run's outputs will
  // be passed to. When both run in worker processes, the outputs are written into shared
  // memory that `outputs_for`'s worker keeps mapped read-only, so `outputs_for->run()` on
  // them copies nothing into its worker (without this, it copies them). Every output of this run, and of later runs naming the
  // same session, becomes readable by that worker: name it only when it may see them.
  // The trade: F's worker keeps that memory mapped writable (it writes it only in a run
  // that names G and only where no Tensor of an earlier such run still views it), so a
  // fault in F's process that writes stray memory while G runs could change G's inputs
  // during G's run; the default copy is taken before G's run starts, out of F's reach.
  // Ignored when either session runs in-process, and outputs passed to another session
  // are copied as usual. Borrowed for the call.
  const class Session* outputs_for = nullptr;
};

// A declared graph input or output.
struct IoInfo {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;          // -1 where the dimension is not fixed
  std::vector<std::string> dim_names;  // symbolic names, "" where fixed or unnamed
  bool has_shape = false;              // false when even the rank is unknown
  bool is_tensor = true;               // false for sequences / optionals
  std::string type_string;             // "float32[1,3,N,N]"
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using NamedValues = std::vector<std::pair<std::string, Value>>;

class SessionImpl;
class EnvImpl;

class Session {
 public:
  Session() = default;
  // Runs the model. Safe from many threads at once; each call's intermediate memory is
  // its own, and the returned tensors are owned by the caller (never aliases of the
  // inputs or of the model's weights).
  Result<NamedTensors> run(const NamedTensors& inputs, const RunOptions& options = {}) const;
  // As run(), for models whose inputs or outputs are sequences or optionals.
  Result<NamedValues> run_values(const NamedValues& inputs, const RunOptions& options = {}) const;
  // A new tensor (uninitialised) to fill and pass to run() as an input of this session.
  // For a session in a worker process (isolation "process") its bytes are shared memory
  // that the worker maps read-only and reads where they are, so a run copies nothing for
  // it; any other tensor is copied into the worker, once per run. The worker can read it
  // for as long as the tensor lives: put in it only what this session may see. For an
  // in-process session, an ordinary host tensor. Fails with one line on a bad type or
  // shape, or one larger than the machine's memory. Thread-safe.
  Result<Tensor> allocate_input(DataType dtype, Shape shape) const;

  const std::vector<IoInfo>& inputs() const;
  const std::vector<IoInfo>& outputs() const;
  // "cpu:0 689 nodes" — how many nodes run on each device.
  std::vector<std::pair<std::string, int>> placement() const;
  // Memory the session's allocator holds on each of its devices ("cpu:0", ...): `peak`
  // is the most its runs have had in use at once (the arena a run needs), `cached` what
  // it keeps for the next run, so that steady-state runs allocate nothing new. Empty for
  // a session in a worker process (isolation "process"). `trimmed` counts what the
  // session gave back after bursts of overlapping runs (SessionOptions::max_concurrent_runs).
  struct MemoryUse {
    std::string device;
    AllocatorStats stats;
  };
  std::vector<MemoryUse> memory() const;
  // The session's runs as they overlap: `limit` is max_concurrent_runs (0 = none),
  // `running` how many execute now, `most_at_once` the most that ever executed at once,
  // `waited` how many runs had to wait for a slot (and `timed_out` how many of those
  // reached their time limit while waiting). Thread-safe; a snapshot.
  struct RunCounts {
    int limit = 0;
    int running = 0;
    int most_at_once = 0;
    uint64_t waited = 0;
    uint64_t timed_out = 0;
  };
  RunCounts runs() const;
  // The arithmetic this session runs (SessionOptions::precision): `effective` is "fp32"
  // or "bf16"; `bf16_nodes` counts the nodes computing on bfloat16; `note` says why
  // `effective` differs from what was asked ("" when it does not). Also for a session in
  // a worker process (as the worker built it).
  struct PrecisionUse {
    std::string requested, effective;
    int bf16_nodes = 0;
    std::string note;
  };
  PrecisionUse precision() const;
  // The intra-op threads this session's runs use: `requested` is what
  // SessionOptions::threads resolved to (0 = every core), `effective` what runs use, and
  // `note` why ("" when nothing was decided for this session): with
  // SessionOptions::one_thread_when_small, what its first runs measured (while they are
  // being timed, `effective` is 1 and the note says so).
  // For a session in a worker process: what was asked (the worker applies the same rule
  // to its own session). Thread-safe.
  struct ThreadUse {
    int requested = 1, effective = 1;
    std::string note;
  };
  ThreadUse threads() const;
  const SessionOptions& options() const;
  // The pid of the worker process serving this session (isolation "process"); -1 for an
  // in-process session, and between a worker's death and its replacement.
  int worker_pid() const;
  // Process isolation: when the worker has died (between runs, or in a run that failed
  // for it), starts a fresh one now and returns once it has loaded the model, instead of
  // leaving that to the next run; a live worker is left alone. Waits for a run in progress
  // to end first. OK and nothing done for an in-process session. Thread-safe. Servers call
  // it to bring a model back to ready without waiting for a request.
  Status ensure_worker() const;
  bool valid() const { return impl_ != nullptr; }

 private:
  friend class Env;
  friend struct SessionAccess;
  std::shared_ptr<SessionImpl> impl_;
};

class Env {
 public:
  // A new environment with the built-in backends registered.
  Env();
  ~Env();

  // Builds a session from an ONNX file. Errors name the file, node or option at fault.
  Result<Session> load(const std::string& path, const SessionOptions& options = {}) const;
  // Builds a session from serialized ONNX bytes (`name` appears in messages).
  Result<Session> load_bytes(const std::string& bytes, const std::string& name, const SessionOptions& options = {}) const;

  // Process-level copy: routed by the domains that own src and dst (I2).
  Status copy(const Tensor& src, const Tensor& dst) const;

  // Registers a backend library. The Env never unregisters a backend it was given: it
  // only drops its reference when it is destroyed.
  Status register_backend(std::shared_ptr<Backend> backend) const;

  // Backend plugins (include/bulkhead/backend_plugin.h). load_backend opens the library
  // at `path` (a path with a '/'), negotiates the ABI and registers the backend under the
  // name the plugin gives ("opencl"); `options` is handed to the plugin (its own keys,
  // "" for none). Errors leave nothing loaded and the Env as it was: a missing file, no
  // entry, no ABI version in common (naming both), a name already registered, the
  // plugin's own failure. Each Env gets its own backend from the library: two Envs
  // share nothing.
  Status load_backend(const std::string& path, const std::string& options = "") const;
  // As load_backend, for a library the host application loaded itself: `entry` is its
  // bh_backend_plugin_entry (a BhpEntryFn); `label` names it in messages. bulkhead never
  // closes that library.
  using BackendEntry = int32_t (*)(const uint32_t*, uint32_t, uint32_t*, const void**);
  Status add_backend_library(BackendEntry entry, const std::string& label, const std::string& options = "") const;
  // Unloads a plugin backend: new sessions and devices on it are refused at once; what
  // came from it (devices, sessions, tensors, kernels) keeps working, and the library is
  // closed when the last of those is gone, on whichever thread releases it. Loading it
  // again afterwards works. Built-in backends cannot be unloaded.
  Status unload_backend(const std::string& name) const;
  // Each backend's name and where it came from (library, ABI version, who registered it).
  std::vector<std::pair<std::string, BackendOrigin>> backend_origins() const;
  std::vector<std::string> backends() const;
  std::vector<DeviceInfo> devices() const;
  // Devices currently open (held by at least one session or tensor).
  int open_device_count() const;
  // What this Env's sessions share (SessionOptions::share_weights), a snapshot; thread-safe.
  // `tensors`/`bytes`: initializers and folded constants held once for every session that
  // has them; `packed`: weights packed for kernels, likewise; the hits count what a
  // session found already held instead of making its own copy.
  struct SharedWeights {
    size_t tensors = 0;
    size_t bytes = 0;
    size_t packed = 0;
    size_t packed_bytes = 0;
    uint64_t tensor_hits = 0;
    uint64_t hit_bytes = 0;
    uint64_t packed_hits = 0;
  };
  SharedWeights shared_weights() const;

  const std::shared_ptr<EnvImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<EnvImpl> impl_;
};

const char* version();

}  // namespace bulkhead
