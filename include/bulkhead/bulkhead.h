/* bulkhead's stable C API.
 *
 * C99; no C++ in this header. Link with libbulkhead.so (SONAME libbulkhead.so.1),
 * found with `find_package(bulkhead)` (target bulkhead::bulkhead) or
 * `pkg-config --cflags --libs bulkhead`.
 *
 * How it is used:
 *
 *     const BhApi* bh = bh_get_api(BH_API_VERSION);
 *     BhEnv* env = NULL;
 *     BhStatus* st = bh->create_env(&env);
 *     if (st) { fprintf(stderr, "%s\n", bh->status_message(st)); bh->release_status(st); }
 *
 * VERSIONS. Every function is reached through the table bh_get_api() returns for the
 * version a program was built against. The table is append-only: version N+1 adds
 * members after those of version N and never removes, reorders or changes one, so a
 * program built against version 1 keeps working with a library that serves version 2.
 * bh_get_api() returns NULL for a version the library does not serve (one newer than
 * the library, or 0). Each member says since which version it exists; the library pins
 * the size and offsets of every released version with compile-time checks.
 *
 * ERRORS. A function that can fail returns a BhStatus*: NULL means success; otherwise
 * the caller owns the status and releases it with release_status(). A status carries a
 * code (BhStatusCode) and one line of message naming the file, node, input, option or
 * argument at fault. On error, out-parameters are left untouched. No exception, signal
 * or abort crosses this boundary because of bad input; a NULL argument where a handle or
 * out-parameter is required is a BH_INVALID_ARGUMENT status, never a crash.
 *
 * HANDLES. Every handle is opaque, created by a create_* function and released by the
 * matching release_* function, which accepts NULL and must not race with another call
 * using the same handle. Releasing a handle ends the caller's
 * use of it; what it refers to lives on while something else needs it (a session keeps
 * its environment's devices alive; a tensor keeps the memory it owns alive). Handles may
 * be released in any order and on any thread. Passing a handle of the wrong kind, or one
 * recently released, is reported as BH_INVALID_ARGUMENT ("... is a released session
 * handle"); a released handle is detected for the 1,024 most recently released handles
 * of the process, and using one is a bug in the caller all the same.
 *
 * THREADS. BhEnv and BhSession are thread-safe: any function taking one may be called
 * from many threads at once, including run() on one session. BhSessionOptions,
 * BhRunOptions and BhTensor are thread-compatible: concurrent calls that only read one
 * are safe (a tensor may be an input of runs on several threads at once), calls that
 * change one need the caller's own synchronisation. BhStatus and BhDeviceList are
 * immutable once returned.
 *
 * STRINGS are NUL-terminated UTF-8. Strings a function returns through a `const char**`
 * are owned by the handle they came from and stay valid until that handle is released,
 * unless the function says otherwise.
 */
#ifndef BULKHEAD_BULKHEAD_H_
#define BULKHEAD_BULKHEAD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BH_EXPORT __attribute__((visibility("default")))
#else
#define BH_EXPORT
#endif

/* The newest version of the function table this header declares. */
#define BH_API_VERSION 3

/* Status codes. The values are part of the ABI and never change. */
typedef enum BhStatusCode {
  BH_OK = 0,
  BH_INVALID_ARGUMENT = 1,    /* bad input from the caller: names, shapes, types, options, NULLs */
  BH_NOT_FOUND = 2,           /* missing file, input, output, backend or device */
  BH_UNSUPPORTED = 3,         /* an operator, type or attribute bulkhead lacks */
  BH_INVALID_MODEL = 4,       /* a corrupt or malformed model */
  BH_FAILED_PRECONDITION = 5, /* the call is not allowed in the object's state */
  BH_RESOURCE_EXHAUSTED = 6,  /* out of memory, or a limit set in the options */
  BH_INTERNAL = 7,            /* a broken internal invariant: a bug in bulkhead */
  BH_UNAVAILABLE = 8,         /* a worker process or device went away */
  BH_DEADLINE_EXCEEDED = 9    /* a run took longer than its time limit */
} BhStatusCode;

/* Element types; the values are ONNX's TensorProto.DataType and never change. */
typedef enum BhElementType {
  BH_TYPE_UNDEFINED = 0,
  BH_TYPE_FLOAT32 = 1,
  BH_TYPE_UINT8 = 2,
  BH_TYPE_INT8 = 3,
  BH_TYPE_UINT16 = 4,
  BH_TYPE_INT16 = 5,
  BH_TYPE_INT32 = 6,
  BH_TYPE_INT64 = 7,
  BH_TYPE_STRING = 8,
  BH_TYPE_BOOL = 9, /* one byte per element, 0 or 1 */
  BH_TYPE_FLOAT16 = 10,
  BH_TYPE_FLOAT64 = 11,
  BH_TYPE_UINT32 = 12,
  BH_TYPE_UINT64 = 13,
  BH_TYPE_BFLOAT16 = 16,
  /* The 8-bit floats, the 4-bit float and the sub-byte integers: ONE BYTE PER ELEMENT in
   * every buffer exchanged through this API (never packed): the float8 types their
   * encoding, UINT4/UINT2 the value, INT4/INT2 the value sign-extended to an int8,
   * FLOAT4E2M1 its code in the low 4 bits. (Model files pack the sub-byte types; bulkhead
   * unpacks them on loading.) Available from C API version 2. */
  BH_TYPE_FLOAT8E4M3FN = 17,
  BH_TYPE_FLOAT8E4M3FNUZ = 18,
  BH_TYPE_FLOAT8E5M2 = 19,
  BH_TYPE_FLOAT8E5M2FNUZ = 20,
  BH_TYPE_UINT4 = 21,
  BH_TYPE_INT4 = 22,
  BH_TYPE_FLOAT4E2M1 = 23,
  BH_TYPE_FLOAT8E8M0 = 24,
  BH_TYPE_UINT2 = 25,
  BH_TYPE_INT2 = 26
} BhElementType;

/* What a graph input or output holds. */
typedef enum BhValueKind {
  BH_VALUE_TENSOR = 0,
  BH_VALUE_SEQUENCE = 1, /* a sequence of tensors: not exchanged through API version 1 */
  BH_VALUE_OPTIONAL = 2  /* an optional tensor: NULL where absent (see run()) */
} BhValueKind;

/* Which side of a session's signature. */
typedef enum BhIoSide { BH_INPUT = 0, BH_OUTPUT = 1 } BhIoSide;

/* Where a tensor's bytes live. */
typedef enum BhMemoryKind {
  BH_MEMORY_HOST = 0,         /* ordinary process memory */
  BH_MEMORY_DEVICE_LOCAL = 1, /* device memory the CPU cannot read: copy it out with copy() */
  BH_MEMORY_HOST_VISIBLE = 2  /* device memory mapped into the process */
} BhMemoryKind;

/* What a session's allocator holds on one device, in bytes. A plain value; version 1's
 * layout is pinned. */
typedef struct BhMemoryUsage {
  uint64_t in_use;       /* in live buffers now */
  uint64_t peak;         /* the most in live buffers at once */
  uint64_t cached;       /* kept for the next run (not in a live buffer) */
  uint64_t arena;        /* of in_use + cached, the arena a run's intermediates are planned in */
  uint64_t arena_blocks; /* the allocations of one run placed in the arena */
} BhMemoryUsage;

typedef struct BhStatus BhStatus;               /* an error: code and message */
typedef struct BhEnv BhEnv;                     /* backends, open devices, copy router */
typedef struct BhSessionOptions BhSessionOptions;
typedef struct BhSession BhSession;             /* a loaded model */
typedef struct BhRunOptions BhRunOptions;
typedef struct BhTensor BhTensor;               /* a typed, shaped array */
typedef struct BhDeviceList BhDeviceList;       /* a snapshot of an environment's devices */

/* Called once when bulkhead no longer needs memory it borrowed from the caller
 * (create_tensor_borrowed). It may be called on any thread, from within release_tensor()
 * or from within a run still using the tensor; it must not call back into bulkhead. */
typedef void (*BhReleaseFn)(void* user_data, void* data);
/* A backend plugin's entry (bh_backend_plugin_entry; see bulkhead/backend_plugin.h). */
typedef int32_t (*BhBackendEntryFn)(const uint32_t* host_versions, uint32_t num_host_versions, uint32_t* chosen_version,
                                    const void** table);

typedef struct BhApi {
  /* ---- version 1 ---------------------------------------------------------------- */

  /* Status. */
  /* The status's code; BH_OK for NULL. */
  BhStatusCode (*status_code)(const BhStatus* status);
  /* Its one-line message, owned by the status; "" for NULL. */
  const char* (*status_message)(const BhStatus* status);
  void (*release_status)(BhStatus* status);

  /* Environment. */
  /* A new environment with the built-in backends ("cpu", "vulkan") registered. Several
   * may exist in one process; they share nothing. Caller releases *out with
   * release_env(); sessions and tensors made from it keep what they use alive, so it may
   * be released before them. */
  BhStatus* (*create_env)(BhEnv** out);
  void (*release_env)(BhEnv* env);
  /* The registered backends' names now, comma-separated ("cpu,faulty,vulkan"), owned by
   * the environment and valid until it is released. */
  BhStatus* (*env_backends)(const BhEnv* env, const char** out);
  /* A snapshot of every device the registered backends can open. Caller releases *out
   * with release_device_list(). */
  BhStatus* (*env_devices)(const BhEnv* env, BhDeviceList** out);
  /* How many devices are open now (held by a session or a tensor). */
  BhStatus* (*env_open_device_count)(const BhEnv* env, size_t* out);

  /* Device list: the strings are owned by the list. */
  size_t (*device_list_count)(const BhDeviceList* list);
  /* Device `index`'s name as a session option takes it ("cpu:0", "vulkan:1"), its
   * backend, its human-readable description (device name and driver) and the submission
   * policy it would use. Any out-parameter may be NULL. */
  BhStatus* (*device_list_get)(const BhDeviceList* list, size_t index, const char** name, const char** backend,
                               const char** description, const char** submit_policy);
  void (*release_device_list)(BhDeviceList* list);

  /* Session options: defaults are those of bulkhead's C++ SessionOptions (devices "cpu",
   * threads 0 = one per core, optimisation level 2, graph capture on, in-process). Every
   * setter checks its value and leaves the options unchanged on error. Options are copied
   * into a session when it is created; changing them afterwards does not change it. */
  BhStatus* (*create_session_options)(BhSessionOptions** out);
  void (*release_session_options)(BhSessionOptions* options);
  /* Devices in order of preference, comma-separated: "cpu", "vulkan:0,cpu". */
  BhStatus* (*session_options_set_devices)(BhSessionOptions* options, const char* devices);
  /* Intra-op threads for each run, 0..1024; 0 = one per core. */
  BhStatus* (*session_options_set_threads)(BhSessionOptions* options, int threads);
  /* 0 = off, 1 = fold and fuse, 2 = 1 plus blocked layouts on the CPU (default). */
  BhStatus* (*session_options_set_optimization_level)(BhSessionOptions* options, int level);
  /* Record once and replay GPU command buffers for static graphs: 1 on (default), 0 off. */
  BhStatus* (*session_options_set_graph_capture)(BhSessionOptions* options, int enabled);
  /* GPU submission: "single", "per-dispatch", "split", "auto" or "auto:<bytes>[K|M|G]";
   * "" = the device's default. */
  BhStatus* (*session_options_set_submit_policy)(BhSessionOptions* options, const char* policy);
  /* "in-process" (default) or "process": the session lives in a worker process. */
  BhStatus* (*session_options_set_isolation)(BhSessionOptions* options, const char* isolation);
  /* Process isolation: a run not answered within this long fails and its worker is
   * replaced; > 0. */
  BhStatus* (*session_options_set_worker_timeout_ms)(BhSessionOptions* options, int64_t timeout_ms);
  /* Process isolation: the bulkhead program to start as the worker; "" = $BULKHEAD_WORKER,
   * else the `bulkhead` program installed beside libbulkhead (../bin/bulkhead). */
  BhStatus* (*session_options_set_worker_binary)(BhSessionOptions* options, const char* path);
  /* Limits for untrusted models and inputs, 0 = none (max_file_bytes: default 64 GiB). */
  BhStatus* (*session_options_set_max_file_bytes)(BhSessionOptions* options, uint64_t bytes);
  BhStatus* (*session_options_set_max_tensor_bytes)(BhSessionOptions* options, uint64_t bytes);
  BhStatus* (*session_options_set_max_loop_iterations)(BhSessionOptions* options, int64_t iterations);
  BhStatus* (*session_options_set_run_timeout_ms)(BhSessionOptions* options, int64_t timeout_ms);
  /* Applies an option string as the CLI's --options takes it:
   * "devices=vulkan:0,cpu;threads=2;graph_capture=0". All or nothing. Keys: devices,
   * threads, graph_capture, optimization_level, isolation, worker_timeout_ms,
   * worker_binary, submit_policy, max_file_bytes, max_tensor_bytes, max_loop_iterations,
   * run_timeout_ms, max_concurrent_runs, share_weights, release_idle_memory, release_idle_after_ms,
   * one_thread_when_small and precision=fp32|bf16 (CPU convolutions and products on bfloat16; see SessionOptions
   * in bulkhead.hpp). */
  BhStatus* (*session_options_apply)(BhSessionOptions* options, const char* spec);

  /* Sessions. */
  /* Loads the ONNX model at `path` (external data beside it). `options` may be NULL (the
   * defaults). Caller releases *out with release_session(). */
  BhStatus* (*create_session)(BhEnv* env, const char* path, const BhSessionOptions* options, BhSession** out);
  /* The same from serialized ONNX bytes, copied before it returns; `name` appears in
   * messages (may be NULL). A model with external data must be loaded from a path. */
  BhStatus* (*create_session_from_bytes)(BhEnv* env, const void* bytes, size_t size, const char* name,
                                         const BhSessionOptions* options, BhSession** out);
  /* Ends the caller's use of the session; tensors it returned stay valid. As with every
   * handle, no other thread may be inside a call with this session when it is released. */
  void (*release_session)(BhSession* session);

  /* A session's signature: its required inputs and its outputs, in graph order. */
  BhStatus* (*session_io_count)(const BhSession* session, BhIoSide side, size_t* out);
  BhStatus* (*session_io_name)(const BhSession* session, BhIoSide side, size_t index, const char** out);
  /* For a sequence or optional, the type of its elements. */
  BhStatus* (*session_io_element_type)(const BhSession* session, BhIoSide side, size_t index, BhElementType* out);
  BhStatus* (*session_io_value_kind)(const BhSession* session, BhIoSide side, size_t index, BhValueKind* out);
  /* The declared shape: *dims (owned by the session) holds *rank entries, -1 where a
   * dimension is not fixed. *rank is -1 when even the rank is unknown (*dims is NULL). */
  BhStatus* (*session_io_shape)(const BhSession* session, BhIoSide side, size_t index, const int64_t** dims,
                                int64_t* rank);
  /* The symbolic name of dimension `dim` ("batch"), "" where it is fixed or unnamed. */
  BhStatus* (*session_io_dim_name)(const BhSession* session, BhIoSide side, size_t index, size_t dim,
                                   const char** out);
  /* Nodes placed on each device: entry `index` of session_placement_count(). */
  BhStatus* (*session_placement_count)(const BhSession* session, size_t* out);
  BhStatus* (*session_placement)(const BhSession* session, size_t index, const char** device, int64_t* nodes);
  /* Memory the session's allocator holds on each of its devices now: entry `index` of
   * session_memory_count(). None for a session in a worker process. *device is owned by
   * the session. */
  BhStatus* (*session_memory_count)(const BhSession* session, size_t* out);
  BhStatus* (*session_memory)(const BhSession* session, size_t index, const char** device, BhMemoryUsage* out);
  /* The worker's pid (isolation "process"); -1 in process or while it is being replaced. */
  BhStatus* (*session_worker_pid)(const BhSession* session, int64_t* out);

  /* Run options. */
  BhStatus* (*create_run_options)(BhRunOptions** out);
  void (*release_run_options)(BhRunOptions* options);
  /* This run's time limit: -1 = the session's (default), 0 = none, > 0 milliseconds. */
  BhStatus* (*run_options_set_timeout_ms)(BhRunOptions* options, int64_t timeout_ms);

  /* Runs the model. Thread-safe: many threads may run one session at once.
   *   inputs: input_count tensors, bound to input_names (each a required input of the
   *     session, each once). An optional input may be passed as NULL. The tensors are
   *     only read, and only during the call (a borrowed tensor's memory may be reused as
   *     soon as run() returns).
   *   output_names: the outputs wanted, in the order wanted; NULL = every output in graph
   *     order, and then output_count must equal session_io_count(BH_OUTPUT).
   *   outputs: an array of output_count slots the caller provides; on success slot i
   *     holds a new host tensor the caller releases with release_tensor() (NULL for an
   *     optional output the model left empty). Untouched on error.
   *   options: may be NULL.
   * A sequence input or output is BH_UNSUPPORTED in API version 1. */
  BhStatus* (*run)(const BhSession* session, const BhRunOptions* options, const char* const* input_names,
                   const BhTensor* const* inputs, size_t input_count, const char* const* output_names,
                   size_t output_count, BhTensor** outputs);

  /* Tensors. */
  /* A new host tensor of zeroed bulkhead memory; `dims` holds `rank` non-negative entries
   * (may be NULL when rank is 0, a scalar). Not for strings (create_string_tensor).
   * Caller releases *out with release_tensor(). */
  BhStatus* (*create_tensor)(BhElementType type, const int64_t* dims, size_t rank, BhTensor** out);
  /* A host tensor over the caller's memory, without a copy: `data` holds `size` bytes,
   * exactly the tensor's byte size, aligned to the element size. bulkhead calls
   * release(user_data, data) once when it no longer needs the memory (when the tensor is
   * released and no run still uses it); `release` may be NULL (the caller then keeps the
   * memory valid until release_tensor() returns and every run using it has returned).
   * On error, release is not called. */
  BhStatus* (*create_tensor_borrowed)(BhElementType type, const int64_t* dims, size_t rank, void* data,
                                      size_t size, BhReleaseFn release, void* user_data, BhTensor** out);
  /* A new string tensor holding copies of `count` NUL-terminated strings (count must be
   * the element count of dims). */
  BhStatus* (*create_string_tensor)(const char* const* strings, size_t count, const int64_t* dims, size_t rank,
                                    BhTensor** out);
  /* A new tensor of zeroed memory on `device` ("cpu", "vulkan:0"), in that device's
   * compute memory: the other end of a process-level copy(). It keeps the device open
   * until it is released. */
  BhStatus* (*create_device_tensor)(BhEnv* env, const char* device, BhElementType type, const int64_t* dims,
                                    size_t rank, BhTensor** out);
  void (*release_tensor)(BhTensor* tensor);
  BhStatus* (*tensor_element_type)(const BhTensor* tensor, BhElementType* out);
  /* *dims is owned by the tensor. */
  BhStatus* (*tensor_shape)(const BhTensor* tensor, const int64_t** dims, size_t* rank);
  BhStatus* (*tensor_element_count)(const BhTensor* tensor, int64_t* out);
  /* Bytes of the elements (0 for strings). */
  BhStatus* (*tensor_byte_size)(const BhTensor* tensor, size_t* out);
  /* The CPU address of the first element, for host and host-visible tensors;
   * BH_FAILED_PRECONDITION for device-local memory and for strings. Valid until the
   * tensor is released; writable (a tensor passed to run() must not be written during
   * the run). */
  BhStatus* (*tensor_data)(const BhTensor* tensor, void** out);
  /* Where the tensor's bytes live, and which device ("host" for plain process memory;
   * owned by the tensor). Either out-parameter may be NULL. */
  BhStatus* (*tensor_location)(const BhTensor* tensor, BhMemoryKind* kind, const char** device);
  /* Element `index` of a string tensor: *data (owned by the tensor) holds *size bytes
   * followed by a NUL. */
  BhStatus* (*tensor_string)(const BhTensor* tensor, size_t index, const char** data, size_t* size);

  /* A process-level copy of src's bytes into dst, routed by the memory each lives in (host
   * and any device of this environment, in either direction). Same type and shape. */
  BhStatus* (*copy)(BhEnv* env, const BhTensor* src, BhTensor* dst);

  /* The library's version, "0.1.0"; static storage. */
  const char* (*version_string)(void);

  /* ---- since version 2: backend plugins (bulkhead/backend_plugin.h) ---- */

  /* Loads the backend plugin library at `path` (a path with a '/') into the environment
   * and registers its backend under the name the plugin gives ("opencl"); `options` is
   * the plugin's own option text (NULL or "" for none). Errors leave the environment as
   * it was: a missing file, no entry, no ABI version in common (the message names both),
   * a name already registered, the plugin's own failure. Two environments that load the
   * same library share nothing. Thread-safe. */
  BhStatus* (*env_load_backend)(BhEnv* env, const char* path, const char* options);
  /* As env_load_backend, for a library the caller loaded itself: `entry` is its
   * bh_backend_plugin_entry; `label` (NULL for none) names it in messages. bulkhead never
   * closes that library: the caller may close it once every environment, session and
   * tensor that used it is released. */
  BhStatus* (*env_add_backend_library)(BhEnv* env, BhBackendEntryFn entry, const char* label, const char* options);
  /* Unloads a plugin backend: sessions and devices on it are refused from now on; those
   * alive keep working, and the library is closed when the last of them (and of their
   * tensors) is released, on whichever thread releases it. Loading it again works.
   * Built-in backends: BH_FAILED_PRECONDITION. */
  BhStatus* (*env_unload_backend)(BhEnv* env, const char* name);

  /* ---- since version 3: hand-offs to sessions in worker processes without a copy ---- */

  /* A new host tensor (zeroed) to fill and pass to run() as an input of `session`, for
   * as many runs as the caller likes. For a session in a worker process (isolation
   * "process") its memory is shared memory that the worker maps read-only and reads
   * where it is, so a run copies nothing for it (any other tensor is copied into the
   * worker once per run). The worker can read it for as long as the tensor lives: put in
   * it only what this session may see. For an in-process session, an ordinary host
   * tensor. `dims` as create_tensor; not for strings. Thread-safe. Caller releases *out
   * with release_tensor(). */
  BhStatus* (*session_create_input_tensor)(const BhSession* session, BhElementType type, const int64_t* dims,
                                           size_t rank, BhTensor** out);
  /* Pipelines F -> G: `next` is the session the outputs of runs with these options will
   * be passed to (NULL, the default: none). When both run in worker processes, the
   * outputs are written into shared memory that `next`'s worker keeps mapped read-only,
   * so running `next` on them copies nothing. Every output of such runs becomes readable
   * by that worker: name it only when it may see them. The trade: F's worker keeps that
   * memory mapped writable, so a fault in F's process writing stray memory during
   * `next`'s run could change `next`'s inputs, where the default copy is taken before
   * `next`'s run. Ignored when either session runs in-process. The options keep `next`'s
   * model alive until they are released or set again. */
  BhStatus* (*run_options_set_outputs_for)(BhRunOptions* options, const BhSession* next);
} BhApi;

/* The function table for API `version` (1 ... BH_API_VERSION of the library), or NULL
 * when the library does not serve it. Static storage; any thread. */
BH_EXPORT const BhApi* bh_get_api(uint32_t version);

/* The newest API version this library serves. */
BH_EXPORT uint32_t bh_api_version(void);

#ifdef __cplusplus
}
#endif

#endif /* BULKHEAD_BULKHEAD_H_ */
