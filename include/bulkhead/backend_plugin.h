/* bulkhead's backend plugin ABI: how a backend library (a .so) is loaded by bulkhead.
 *
 * C99; no C++ in this header. A plugin is compiled against this header and bulkhead.h
 * only (for BhStatusCode, BhElementType and BhMemoryKind) and links nothing of bulkhead.
 *
 * ENTRY. A plugin library exports one function, named BHP_ENTRY_NAME:
 *
 *     BHP_EXPORT int32_t bh_backend_plugin_entry(const uint32_t* host_versions,
 *                                                uint32_t num_host_versions,
 *                                                uint32_t* chosen_version,
 *                                                const void** table);
 *
 * The host lists the ABI versions it speaks. A plugin that speaks one of them writes
 * that version to *chosen_version and its function table of that version (for version
 * 1, a `const BhpPluginV1*`) to *table, and returns 0. A plugin that speaks none writes
 * the newest version it speaks to *chosen_version, leaves *table alone and returns
 * nonzero; the host then reports one error naming both sides' versions and registers
 * nothing. The entry has no side effects and keeps no state: it may be called any number
 * of times, from any thread, and the table it returns is immutable and valid until the
 * library is closed.
 *
 * VERSIONS. Every struct begins with `struct_size` (the size the writer was compiled
 * with). Members are only ever appended: a reader checks struct_size before it reads a
 * member added after version 1, and treats one beyond struct_size as absent (NULL / 0).
 * An array of structs is stepped through with its elements' struct_size, so that a reader
 * built against an older header still finds element i of a newer writer's array: use
 * BHP_AT(type, array, i). A struct the caller passes for the callee to fill (an out-
 * parameter) has its struct_size set by the caller; the callee writes only the members
 * that fit in it.
 * Members marked OPTIONAL may be NULL; the host checks before calling them. A new ABI
 * version is a new table type (BhpPluginV2 …); the host keeps speaking the old ones.
 *
 * ERRORS. A function that can fail returns a BhpStatus*: NULL means success; otherwise
 * a status the plugin made with BhpHost::make_status, which passes to the host with the
 * return (the plugin never keeps or frees it). No C++ exception, longjmp or abort may
 * leave a plugin function; a plugin catches its own. Messages are one line; the host
 * prefixes the backend's name. On error, out-parameters are left untouched, and what the
 * failed call acquired is released before it returns.
 *
 * OBJECTS AND LIFETIME (DESIGN.md I4). The plugin's objects are opaque to the host and
 * form a tree: BhpBackend (one per Env that loaded the library; Envs share nothing) →
 * BhpDevice (one per opened device) → buffers, BhpKernel and BhpSession → BhpRun. The
 * host reference-counts every object and destroys each exactly once, after everything
 * made from it is gone: a run before its session, kernels, buffers and sessions before
 * their device, devices before their backend, and the backend before the library is
 * closed. Destruction may happen on any thread, including one that never called the
 * plugin before. A library the host application loaded itself and handed to bulkhead
 * (Env::add_backend_library) is never closed by bulkhead.
 *
 * NO GLOBAL STATE. A plugin keeps no process-global mutable state: everything lives in
 * the objects above, so that two Envs (or two loads of the library) never see each
 * other's devices, memory or queues. Driver-global state the plugin cannot avoid (an
 * ICD loader) is the driver's.
 *
 * MEMORY (I1). Every buffer the plugin hands out belongs to one device and one session
 * (or to the device, for session == NULL). The host wraps it in a Buffer that records its
 * domain (the device's compute domain) and keeps the device alive; the plugin never
 * decides which backend memory belongs to.
 *
 * TRANSFERS (I2). The plugin declares which transfers it can perform by the functions it
 * fills in: `write_buffer` (host → device), `read_buffer` (device → host) and, OPTIONAL,
 * `copy_buffer`
 * (device → device, same device). The host registers them with its copy router for the
 * device's domain pairs; a copy between two plugins' devices is staged through host
 * memory by the host. A plugin is never handed memory of another domain: a tensor's
 * `handle` is always one of its own buffers.
 *
 * THREADS. Unless a function says otherwise, it may be called from any thread, at the
 * same time as any other function on other objects and on the same object. The
 * exceptions are spelled out: a BhpRun belongs to one thread at a time.
 */
#ifndef BULKHEAD_BACKEND_PLUGIN_H_
#define BULKHEAD_BACKEND_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "bulkhead/bulkhead.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BHP_EXPORT __attribute__((visibility("default")))
#else
#define BHP_EXPORT
#endif

/* The newest plugin ABI version this header declares. */
#define BHP_ABI_VERSION 1
/* The name of the one function a plugin library exports. */
#define BHP_ENTRY_NAME "bh_backend_plugin_entry"

/* Element `i` of an array of ABI structs, stepping by the elements' struct_size. */
#define BHP_AT(type, array, i) \
  ((const type*)((const char*)(array) + (size_t)(i) * (size_t)((const type*)(array))->struct_size))

typedef int32_t (*BhpEntryFn)(const uint32_t* host_versions, uint32_t num_host_versions, uint32_t* chosen_version,
                              const void** table);

/* Opaque objects. BhpStatus is the host's; the others are the plugin's. */
typedef struct BhpStatus BhpStatus;
typedef struct BhpBackend BhpBackend;
typedef struct BhpDevice BhpDevice;
typedef struct BhpSession BhpSession;
typedef struct BhpKernel BhpKernel;
typedef struct BhpRun BhpRun;

typedef enum BhpLogLevel { BHP_LOG_DEBUG = 0, BHP_LOG_INFO = 1, BHP_LOG_WARNING = 2, BHP_LOG_ERROR = 3 } BhpLogLevel;

/* What the host gives a backend when it is created. Valid, unchanged, until the backend
 * is destroyed; the plugin may keep the pointer in its objects. Both functions are
 * thread-safe. */
typedef struct BhpHost {
  uint32_t struct_size;
  uint32_t abi_version; /* the version the entry chose */
  void* context;        /* pass back to the functions below */
  /* A status for the plugin to return. `code` is a BhStatusCode other than BH_OK;
   * `message` is copied (NULL is read as ""). Never returns NULL. */
  BhpStatus* (*make_status)(void* context, int32_t code, const char* message);
  /* A line for the host's log (copied; may be dropped by the host's log level). */
  void (*log)(void* context, int32_t level, const char* message);
} BhpHost;

/* One device, as enumerate describes it. The strings belong to the backend and stay
 * valid until it is destroyed. */
typedef struct BhpDeviceInfo {
  uint32_t struct_size;
  const char* name;          /* "pthread-skylake-avx512" */
  const char* driver;        /* driver and its version */
  const char* submit_policy; /* the policy the device would use and why; "" if none */
  const char* detail;        /* anything else worth printing; may be "" */
  int32_t memory_kind;       /* BhMemoryKind of the device's compute memory */
} BhpDeviceInfo;

/* A buffer the plugin allocated. `handle` identifies it to the plugin (never NULL);
 * `host_data` is a CPU pointer to its bytes when the memory is host-visible or host,
 * NULL for device-local memory. */
typedef struct BhpBuffer {
  uint32_t struct_size;
  void* handle;
  void* host_data;
} BhpBuffer;

/* An operator the device may run: (domain, op_type) from opset `since_version` on. The
 * host still asks create_kernel, which may refuse a particular node. */
typedef struct BhpOpInfo {
  uint32_t struct_size;
  const char* domain; /* "" for the default ONNX domain */
  const char* op_type;
  int32_t since_version;
} BhpOpInfo;

typedef enum BhpAttributeType {
  BHP_ATTR_UNDEFINED = 0,
  BHP_ATTR_FLOAT = 1,
  BHP_ATTR_INT = 2,
  BHP_ATTR_STRING = 3,
  BHP_ATTR_FLOATS = 6,
  BHP_ATTR_INTS = 7,
  BHP_ATTR_STRINGS = 8,
  BHP_ATTR_OTHER = 100 /* a tensor or a graph: not readable through ABI 1 */
} BhpAttributeType;

typedef struct BhpAttribute {
  uint32_t struct_size;
  const char* name;
  int32_t type;          /* BhpAttributeType */
  int64_t i;             /* INT */
  float f;               /* FLOAT */
  const char* s;         /* STRING (bytes, s_size of them, NUL-terminated as well) */
  uint64_t s_size;
  const int64_t* ints;   /* INTS */
  const float* floats;   /* FLOATS */
  const char* const* strings; /* STRINGS (NUL-terminated) */
  uint64_t count;        /* elements of INTS / FLOATS / STRINGS */
} BhpAttribute;

/* What the host knows of a node input or output when kernels are created. */
typedef struct BhpValueInfo {
  uint32_t struct_size;
  int32_t present;       /* 0 for an omitted optional input / an unused output */
  int32_t dtype;         /* BhElementType; BH_TYPE_UNDEFINED when unknown */
  int32_t rank;          /* -1 when unknown */
  const int64_t* dims;   /* rank entries; -1 for a dimension not known until run time */
  /* For an input whose value is fixed for the session (a weight, a folded constant):
   * its bytes in host memory, valid only during create_kernel (copy what you keep). */
  const void* constant_data;
  uint64_t constant_size;
} BhpValueInfo;

/* A node the host asks the device to run. Everything is borrowed, valid only during
 * create_kernel. */
typedef struct BhpNode {
  uint32_t struct_size;
  const char* name;
  const char* op_type;
  const char* domain;
  int32_t opset; /* the model's opset for the node's domain */
  uint32_t num_inputs;
  const BhpValueInfo* inputs;
  uint32_t num_outputs;
  const BhpValueInfo* outputs;
  uint32_t num_attributes;
  const BhpAttribute* attributes;
} BhpNode;

/* A tensor handed to or made for a kernel: a view of one of the plugin's buffers. */
typedef struct BhpTensor {
  uint32_t struct_size;
  int32_t dtype;        /* BhElementType; BH_TYPE_UNDEFINED for an omitted input */
  uint32_t rank;
  const int64_t* dims;  /* borrowed for the call */
  void* handle;         /* the plugin buffer the tensor is a view of (NULL when empty) */
  uint64_t offset;      /* byte offset of the first element in that buffer */
  void* host_data;      /* CPU pointer to the first element, or NULL (device-local) */
} BhpTensor;

/* One call of a kernel. Made by the host for the call; every pointer is valid only
 * during compute. The functions are the host's, called with `context`, on the calling
 * thread only. */
typedef struct BhpKernelCall {
  uint32_t struct_size;
  BhpRun* run; /* the run this call belongs to (begin_run), or NULL outside a run */
  uint32_t num_inputs;
  const BhpTensor* inputs;
  uint32_t num_outputs;
  const uint8_t* output_wanted; /* num_outputs flags: 0 where the model ignores the output */
  void* context;
  /* Allocates output `index` on the device; fills *out (its dims point at host memory
   * valid for the call). */
  BhpStatus* (*allocate_output)(void* context, uint32_t index, int32_t dtype, uint32_t rank, const int64_t* dims,
                                BhpTensor* out);
  /* Output `index` is input `input`'s bytes with shape dims (same element count): a
   * view, for Reshape, Flatten, Squeeze, Unsqueeze and Identity. */
  BhpStatus* (*alias_output)(void* context, uint32_t index, uint32_t input, uint32_t rank, const int64_t* dims);
  /* Device memory for this call's work only. */
  BhpStatus* (*allocate_scratch)(void* context, uint64_t bytes, BhpTensor* out);
} BhpKernelCall;

/* Options of a session opening on a device. Borrowed for open_session. */
typedef struct BhpSessionConfig {
  uint32_t struct_size;
  const char* owner;         /* names the session in messages */
  const char* submit_policy; /* "" = the device's default; unknown → BH_INVALID_ARGUMENT */
  int32_t graph_capture;     /* nonzero: the plugin may record once and replay (I6) */
} BhpSessionConfig;

/* What a run is, told to begin_run. */
typedef struct BhpRunInfo {
  uint32_t struct_size;
  uint32_t num_nodes; /* top-level nodes this device dispatches in the run */
  int32_t capturable; /* every run makes the same allocations and dispatches */
} BhpRunInfo;

/* Counters since the device opened, for tests and `bulkhead devices`. */
typedef struct BhpCounters {
  uint32_t struct_size;
  uint64_t submits;      /* every submission to the device's queues */
  uint64_t run_submits;  /* those that carried runs' kernels */
  uint64_t dispatches;   /* kernel launches */
  uint64_t replays;      /* submissions of captured work */
  uint64_t memory_bytes; /* device memory the device holds now */
} BhpCounters;

/* Version 1 of the plugin table. */
typedef struct BhpPluginV1 {
  uint32_t struct_size;
  uint32_t abi_version; /* 1 */
  const char* name;     /* the backend's name in device specs: "opencl" → "opencl:0" */
  const char* version;  /* the plugin's own version */

  /* --- backend --- */
  /* A backend for one Env. `options` is the text the user passed when loading ("" when
   * none; the plugin documents its keys and refuses unknown ones with
   * BH_INVALID_ARGUMENT). Thread-safe. */
  BhpStatus* (*create_backend)(const BhpHost* host, const char* options, BhpBackend** out);
  /* Called once, after every device of the backend is closed. */
  void (*destroy_backend)(BhpBackend* backend);
  /* The devices this backend can open, without side effects beyond asking the driver
   * (no device is opened, nothing is allocated that outlives the call). A missing driver
   * is 0 devices, not an error. */
  BhpStatus* (*device_count)(BhpBackend* backend, int32_t* count);
  BhpStatus* (*describe_device)(BhpBackend* backend, int32_t ordinal, BhpDeviceInfo* out);

  /* --- devices --- */
  /* Opens device `ordinal`: its context, its immutable compiled kernels, its transfer
   * queue. The host opens an ordinal at most once at a time per backend and shares it
   * among its sessions. */
  BhpStatus* (*open_device)(BhpBackend* backend, int32_t ordinal, BhpDevice** out);
  /* Called once, after every session, kernel and buffer of the device is gone. */
  void (*close_device)(BhpDevice* device);
  /* The operators the device may run. The array belongs to the device, is immutable and
   * valid until it is closed. */
  BhpStatus* (*list_ops)(BhpDevice* device, const BhpOpInfo** ops, uint32_t* count);

  /* --- memory (I1) --- */
  /* A buffer of at least `bytes` bytes (bytes may be 0), aligned for every element type,
   * for `session` (NULL: for the device itself, e.g. a process-level tensor). */
  BhpStatus* (*allocate)(BhpDevice* device, BhpSession* session, uint64_t bytes, BhpBuffer* out);
  /* Returns a buffer (the handle allocate gave, with the same session). Called when the
   * host's last reference goes, on any thread, never while queued work uses it. */
  void (*free_buffer)(BhpDevice* device, BhpSession* session, void* handle);

  /* --- transfers (I2) --- */
  /* Host → device: `bytes` bytes from `src` to buffer `handle` at `offset`. Complete
   * when it returns. */
  BhpStatus* (*write_buffer)(BhpDevice* device, void* handle, uint64_t offset, const void* src, uint64_t bytes);
  /* Device → host, complete when it returns. Sees every write of every flushed run. */
  BhpStatus* (*read_buffer)(BhpDevice* device, void* handle, uint64_t offset, void* dst, uint64_t bytes);
  /* OPTIONAL. Device → device on this device. */
  BhpStatus* (*copy_buffer)(BhpDevice* device, void* src_handle, uint64_t src_offset, void* dst_handle,
                     uint64_t dst_offset, uint64_t bytes);

  /* --- kernels --- */
  /* A kernel for `node`, or BH_UNSUPPORTED with the reason (the host then places the
   * node on another device). Kernels are immutable: compute may be called from many
   * threads at once, each call with its own BhpKernelCall. */
  BhpStatus* (*create_kernel)(BhpDevice* device, const BhpNode* node, BhpKernel** out);
  void (*destroy_kernel)(BhpKernel* kernel);
  /* Queues (or performs) the node's work for call->run. Results must be complete and
   * visible to read_buffer/copy_buffer after the run's next flush; with call->run NULL
   * (constant folding), when compute returns. The host keeps every buffer a call
   * touched (inputs, outputs, scratch) alive until the run's next flush has returned, so
   * free_buffer is never called for memory that queued work may still use. */
  BhpStatus* (*compute)(const BhpKernel* kernel, const BhpKernelCall* call);

  /* --- sessions (I3) and runs (I5, I6) --- */
  /* A session's execution state on the device: its queues, pools and scratch, never
   * shared with another session. Checks the config (an unknown policy is an error). */
  BhpStatus* (*open_session)(BhpDevice* device, const BhpSessionConfig* config, BhpSession** out);
  /* Called once, after every run and buffer of the session is gone. */
  void (*close_session)(BhpSession* session);
  /* A run of the session begins on the calling thread; runs of one session may overlap
   * on different threads, each with its own BhpRun. A BhpRun is used by one thread at a
   * time. */
  BhpStatus* (*begin_run)(BhpSession* session, const BhpRunInfo* info, BhpRun** out);
  /* Submits what the run has queued, per the session's submission policy, and waits
   * until it is complete and visible to read/copy. */
  BhpStatus* (*flush)(BhpRun* run);
  /* The run is over (`ok` is 0 when it failed part-way): release it. */
  void (*end_run)(BhpRun* run, int32_t ok);

  /* OPTIONAL. Counters of the device. */
  BhpStatus* (*counters)(BhpDevice* device, BhpCounters* out);
} BhpPluginV1;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BULKHEAD_BACKEND_PLUGIN_H_ */
