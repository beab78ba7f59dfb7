/* hostsim: a backend plugin for the plugin host's tests, written in C99 against the
 * public headers only (which shows the ABI is C). Its "device" keeps tensors in process
 * memory that it never shows the host (host_data is NULL: every crossing is a routed
 * write_buffer / read_buffer), and runs float32 Add, Mul and Relu (same shapes, or a
 * one-element operand), MatMul (2-D) and Reshape (a view through alias_output); any
 * other node is refused, so it lands on the next device of the session.
 *
 * Options (comma-separated):
 *   devices=N          how many devices it reports (default 1)
 *   fail_at=STEP       makes STEP fail after acquiring what precedes it in that call:
 *                      create_backend, open_device, list_ops, open_session, allocate,
 *                      create_kernel, begin_run, flush
 *   track=0xADDR       the address of a `HostsimTrack` (below) in the test's memory,
 *                      where the plugin counts its live objects. A test instrument: the
 *                      counters belong to the test, so the plugin holds no global state.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkhead/backend_plugin.h"

/* The test's counters (tests/plugin/hostsim.h declares the same layout). */
typedef struct HostsimTrack {
  int64_t backends, devices, sessions, kernels, buffers, runs;
  int64_t devices_opened, flushes, computes;
} HostsimTrack;

struct BhpBackend {
  BhpHost host;
  int32_t devices;
  char fail_at[32];
  HostsimTrack* track;
};

struct BhpDevice {
  BhpBackend* backend;
  int32_t ordinal;
};

struct BhpSession {
  BhpDevice* device;
  char owner[64];
};

struct BhpRun {
  BhpSession* session;
  uint64_t dispatches;
};

typedef enum { K_ADD, K_MUL, K_RELU, K_MATMUL, K_RESHAPE } KernelKind;

struct BhpKernel {
  BhpDevice* device;
  KernelKind kind;
  char name[64];
  int64_t shape[8]; /* Reshape: the constant target shape */
  uint32_t shape_rank;
};

/* A buffer: its bytes follow the header. */
typedef struct Block {
  uint64_t size;
  unsigned char bytes[];
} Block;

#define TRACK(b, field, delta) \
  do {                         \
    if ((b)->track) __atomic_add_fetch(&(b)->track->field, (delta), __ATOMIC_SEQ_CST); \
  } while (0)

static BhpStatus* error(const BhpHost* h, int32_t code, const char* fmt, const char* a, const char* b) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
  return h->make_status(h->context, code, msg);
}

static int fails(const BhpBackend* b, const char* step) { return strcmp(b->fail_at, step) == 0; }
static BhpStatus* injected(const BhpBackend* b, const char* step) {
  return error(&b->host, BH_INTERNAL, "injected failure at %s", step, NULL);
}

static BhpStatus* create_backend(const BhpHost* host, const char* options, BhpBackend** out) {
  BhpBackend* b = calloc(1, sizeof *b);
  if (!b) return host->make_status(host->context, BH_RESOURCE_EXHAUSTED, "out of memory");
  b->host = *host;
  b->devices = 1;
  const char* p = options ? options : "";
  while (*p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[128];
    if (len >= sizeof item) len = sizeof item - 1;
    memcpy(item, p, len);
    item[len] = 0;
    char* eq = strchr(item, '=');
    BhpStatus* bad = NULL;
    if (!eq) {
      bad = error(host, BH_INVALID_ARGUMENT, "option '%s' is not KEY=VALUE", item, NULL);
    } else {
      *eq = 0;
      const char* v = eq + 1;
      if (strcmp(item, "devices") == 0) {
        b->devices = atoi(v);
        if (b->devices < 0 || b->devices > 8) bad = error(host, BH_INVALID_ARGUMENT, "devices=%s: expected 0-8", v, NULL);
      } else if (strcmp(item, "fail_at") == 0) {
        snprintf(b->fail_at, sizeof b->fail_at, "%s", v);
      } else if (strcmp(item, "track") == 0) {
        b->track = (HostsimTrack*)(uintptr_t)strtoull(v, NULL, 16);
      } else {
        bad = error(host, BH_INVALID_ARGUMENT, "unknown option '%s' (hostsim takes devices, fail_at, track)", item, NULL);
      }
    }
    if (bad) {
      free(b);
      return bad;
    }
    p += len;
    if (*p == ',') ++p;
  }
  if (fails(b, "create_backend")) {
    BhpStatus* s = injected(b, "create_backend");
    free(b);
    return s;
  }
  TRACK(b, backends, 1);
  *out = b;
  return NULL;
}

static void destroy_backend(BhpBackend* b) {
  TRACK(b, backends, -1);
  free(b);
}

static BhpStatus* device_count(BhpBackend* b, int32_t* count) {
  *count = b->devices;
  return NULL;
}

static BhpStatus* describe_device(BhpBackend* b, int32_t ordinal, BhpDeviceInfo* out) {
  if (ordinal < 0 || ordinal >= b->devices) return error(&b->host, BH_NOT_FOUND, "no such device", NULL, NULL);
  out->name = "hostsim device";
  out->driver = "hostsim 1.0";
  out->submit_policy = "";
  out->detail = "process memory the host never reads";
  out->memory_kind = BH_MEMORY_DEVICE_LOCAL;
  return NULL;
}

static BhpStatus* open_device(BhpBackend* b, int32_t ordinal, BhpDevice** out) {
  BhpDevice* d = calloc(1, sizeof *d);
  if (!d) return error(&b->host, BH_RESOURCE_EXHAUSTED, "out of memory", NULL, NULL);
  d->backend = b;
  d->ordinal = ordinal;
  if (fails(b, "open_device")) {
    free(d);
    return injected(b, "open_device");
  }
  TRACK(b, devices, 1);
  TRACK(b, devices_opened, 1);
  *out = d;
  return NULL;
}

static void close_device(BhpDevice* d) {
  TRACK(d->backend, devices, -1);
  free(d);
}

#define OP(name, since) {sizeof(BhpOpInfo), "", name, since}
static const BhpOpInfo kOps[] = {OP("Add", 7), OP("Mul", 7), OP("Relu", 6), OP("MatMul", 1), OP("Reshape", 5)};

static BhpStatus* list_ops(BhpDevice* d, const BhpOpInfo** ops, uint32_t* count) {
  if (fails(d->backend, "list_ops")) return injected(d->backend, "list_ops");
  *ops = kOps;
  *count = sizeof kOps / sizeof kOps[0];
  return NULL;
}

static BhpStatus* allocate(BhpDevice* d, BhpSession* s, uint64_t bytes, BhpBuffer* out) {
  (void)s;
  if (fails(d->backend, "allocate")) return injected(d->backend, "allocate");
  Block* blk = malloc(sizeof(Block) + (bytes ? bytes : 1));
  if (!blk) return error(&d->backend->host, BH_RESOURCE_EXHAUSTED, "out of device memory", NULL, NULL);
  blk->size = bytes;
  TRACK(d->backend, buffers, 1);
  out->handle = blk;
  out->host_data = NULL;
  return NULL;
}

static void free_buffer(BhpDevice* d, BhpSession* s, void* handle) {
  (void)s;
  TRACK(d->backend, buffers, -1);
  free(handle);
}

static BhpStatus* check_range(BhpDevice* d, const Block* b, uint64_t offset, uint64_t bytes) {
  if (offset > b->size || bytes > b->size - offset)
    return error(&d->backend->host, BH_INVALID_ARGUMENT, "transfer outside its buffer", NULL, NULL);
  return NULL;
}

static BhpStatus* write_buffer(BhpDevice* d, void* handle, uint64_t offset, const void* src, uint64_t bytes) {
  Block* b = handle;
  BhpStatus* s = check_range(d, b, offset, bytes);
  if (!s) memcpy(b->bytes + offset, src, bytes);
  return s;
}

static BhpStatus* read_buffer(BhpDevice* d, void* handle, uint64_t offset, void* dst, uint64_t bytes) {
  Block* b = handle;
  BhpStatus* s = check_range(d, b, offset, bytes);
  if (!s) memcpy(dst, b->bytes + offset, bytes);
  return s;
}

static BhpStatus* copy_buffer(BhpDevice* d, void* src, uint64_t so, void* dst, uint64_t dof, uint64_t bytes) {
  BhpStatus* s = check_range(d, src, so, bytes);
  if (!s) s = check_range(d, dst, dof, bytes);
  if (!s) memmove(((Block*)dst)->bytes + dof, ((Block*)src)->bytes + so, bytes);
  return s;
}

static BhpStatus* create_kernel(BhpDevice* d, const BhpNode* n, BhpKernel** out) {
  const BhpHost* h = &d->backend->host;
  KernelKind kind;
  if (strcmp(n->op_type, "Add") == 0) kind = K_ADD;
  else if (strcmp(n->op_type, "Mul") == 0) kind = K_MUL;
  else if (strcmp(n->op_type, "Relu") == 0) kind = K_RELU;
  else if (strcmp(n->op_type, "MatMul") == 0) kind = K_MATMUL;
  else if (strcmp(n->op_type, "Reshape") == 0) kind = K_RESHAPE;
  else return error(h, BH_UNSUPPORTED, "hostsim has no %s", n->op_type, NULL);
  for (uint32_t i = 0; i < n->num_inputs && kind != K_RESHAPE; ++i)
    if (BHP_AT(BhpValueInfo, n->inputs, i)->present && BHP_AT(BhpValueInfo, n->inputs, i)->dtype != BH_TYPE_FLOAT32)
      return error(h, BH_UNSUPPORTED, "node '%s' (%s): hostsim runs float32 only", n->name, n->op_type);
  if (kind == K_ADD || kind == K_MUL) {
    /* Refused here when the shapes are known to need more than hostsim broadcasts. */
    const BhpValueInfo *a = BHP_AT(BhpValueInfo, n->inputs, 0), *c = BHP_AT(BhpValueInfo, n->inputs, 1);
    int known = a->rank >= 0 && c->rank >= 0, same = known && a->rank == c->rank, one_a = known, one_c = known;
    for (int32_t i = 0; known && i < a->rank; ++i) one_a = one_a && a->dims[i] == 1;
    for (int32_t i = 0; known && i < c->rank; ++i) one_c = one_c && c->dims[i] == 1;
    for (int32_t i = 0; same && i < a->rank; ++i) same = a->dims[i] == c->dims[i] && a->dims[i] >= 0;
    if (known && !same && !one_a && !one_c)
      return error(h, BH_UNSUPPORTED, "node '%s' (%s): hostsim broadcasts one-element operands only", n->name, n->op_type);
  }
  BhpKernel* k = calloc(1, sizeof *k);
  if (!k) return error(h, BH_RESOURCE_EXHAUSTED, "out of memory", NULL, NULL);
  k->device = d;
  k->kind = kind;
  snprintf(k->name, sizeof k->name, "%s", n->name);
  if (kind == K_RESHAPE) {
    const BhpValueInfo* s = n->num_inputs > 1 ? BHP_AT(BhpValueInfo, n->inputs, 1) : NULL;
    int ok = s && s->constant_data && s->dtype == BH_TYPE_INT64 && s->rank == 1 && s->dims[0] <= 8;
    for (int64_t i = 0; ok && i < s->dims[0]; ++i) {
      k->shape[i] = ((const int64_t*)s->constant_data)[i];
      ok = k->shape[i] > 0; /* the plain case: no 0 / -1 rules */
    }
    if (!ok) {
      free(k);
      return error(h, BH_UNSUPPORTED, "node '%s' (%s): hostsim reshapes to constant positive dims only", n->name, n->op_type);
    }
    k->shape_rank = (uint32_t)s->dims[0];
  }
  if (fails(d->backend, "create_kernel")) {
    free(k);
    return injected(d->backend, "create_kernel");
  }
  TRACK(d->backend, kernels, 1);
  *out = k;
  return NULL;
}

static void destroy_kernel(BhpKernel* k) {
  TRACK(k->device->backend, kernels, -1);
  free(k);
}

static int64_t numel(const BhpTensor* t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t->rank; ++i) n *= t->dims[i];
  return n;
}

static float* floats(const BhpTensor* t) { return (float*)(((Block*)t->handle)->bytes + t->offset); }

static BhpStatus* compute(const BhpKernel* k, const BhpKernelCall* call) {
  BhpBackend* b = k->device->backend;
  const BhpHost* h = &b->host;
  TRACK(b, computes, 1);
  if (call->run) call->run->dispatches++;
  const BhpTensor* a = BHP_AT(BhpTensor, call->inputs, 0);
  BhpTensor y;
  memset(&y, 0, sizeof y);
  y.struct_size = sizeof y;
  BhpStatus* s = NULL;
  if (k->kind == K_RESHAPE) {
    if (numel(a) != 0) {
      int64_t n = 1;
      for (uint32_t i = 0; i < k->shape_rank; ++i) n *= k->shape[i];
      if (n != numel(a)) return error(h, BH_INVALID_ARGUMENT, "node '%s' (Reshape): element counts differ", k->name, NULL);
    }
    return call->alias_output(call->context, 0, 0, k->shape_rank, k->shape);
  }
  if (k->kind == K_RELU) {
    if ((s = call->allocate_output(call->context, 0, BH_TYPE_FLOAT32, a->rank, a->dims, &y))) return s;
    const float* x = a->handle ? floats(a) : NULL;
    float* o = y.handle ? floats(&y) : NULL;
    for (int64_t i = 0; i < numel(a); ++i) o[i] = x[i] > 0 ? x[i] : 0;
    return NULL;
  }
  const BhpTensor* c = BHP_AT(BhpTensor, call->inputs, 1);
  if (k->kind == K_MATMUL) {
    if (a->rank != 2 || c->rank != 2 || a->dims[1] != c->dims[0])
      return error(h, BH_INVALID_ARGUMENT, "node '%s' (MatMul): hostsim multiplies [M,K] by [K,N]", k->name, NULL);
    int64_t M = a->dims[0], K = a->dims[1], N = c->dims[1], dims[2] = {M, N};
    if ((s = call->allocate_output(call->context, 0, BH_TYPE_FLOAT32, 2, dims, &y))) return s;
    if (!M || !N) return NULL;
    const float *x = floats(a), *w = floats(c);
    float* o = floats(&y);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float acc = 0;
        for (int64_t j = 0; j < K; ++j) acc += x[m * K + j] * w[j * N + n];
        o[m * N + n] = acc;
      }
    return NULL;
  }
  /* Add / Mul: equal shapes, or one operand of one element. */
  int64_t na = numel(a), nc = numel(c);
  int same = a->rank == c->rank;
  for (uint32_t i = 0; same && i < a->rank; ++i) same = a->dims[i] == c->dims[i];
  if (!same && na != 1 && nc != 1)
    return error(h, BH_INVALID_ARGUMENT, "node '%s' (%s): hostsim broadcasts one-element operands only", k->name,
                 k->kind == K_ADD ? "Add" : "Mul");
  const BhpTensor* big = (same || nc == 1) ? a : c;
  if ((s = call->allocate_output(call->context, 0, BH_TYPE_FLOAT32, big->rank, big->dims, &y))) return s;
  int64_t n = numel(big);
  if (!n) return NULL;
  const float *x = floats(a), *z = floats(c);
  float* o = floats(&y);
  for (int64_t i = 0; i < n; ++i) {
    float u = x[na == 1 ? 0 : i], v = z[nc == 1 ? 0 : i];
    o[i] = k->kind == K_ADD ? u + v : u * v;
  }
  return NULL;
}

static BhpStatus* open_session(BhpDevice* d, const BhpSessionConfig* c, BhpSession** out) {
  if (c->submit_policy && *c->submit_policy && strcmp(c->submit_policy, "single") != 0)
    return error(&d->backend->host, BH_INVALID_ARGUMENT, "hostsim has no submission policy '%s' (only single)",
                 c->submit_policy, NULL);
  BhpSession* s = calloc(1, sizeof *s);
  if (!s) return error(&d->backend->host, BH_RESOURCE_EXHAUSTED, "out of memory", NULL, NULL);
  s->device = d;
  snprintf(s->owner, sizeof s->owner, "%s", c->owner ? c->owner : "");
  if (fails(d->backend, "open_session")) {
    free(s);
    return injected(d->backend, "open_session");
  }
  TRACK(d->backend, sessions, 1);
  *out = s;
  return NULL;
}

static void close_session(BhpSession* s) {
  TRACK(s->device->backend, sessions, -1);
  free(s);
}

static BhpStatus* begin_run(BhpSession* s, const BhpRunInfo* info, BhpRun** out) {
  (void)info;
  BhpBackend* b = s->device->backend;
  if (fails(b, "begin_run")) return injected(b, "begin_run");
  BhpRun* r = calloc(1, sizeof *r);
  if (!r) return error(&b->host, BH_RESOURCE_EXHAUSTED, "out of memory", NULL, NULL);
  r->session = s;
  TRACK(b, runs, 1);
  *out = r;
  return NULL;
}

static BhpStatus* flush(BhpRun* r) {
  BhpBackend* b = r->session->device->backend;
  TRACK(b, flushes, 1);
  return fails(b, "flush") ? injected(b, "flush") : NULL;
}

static void end_run(BhpRun* r, int32_t ok) {
  (void)ok;
  TRACK(r->session->device->backend, runs, -1);
  free(r);
}

static BhpStatus* counters(BhpDevice* d, BhpCounters* out) {
  (void)d;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  return NULL;
}

static const BhpPluginV1 kTable = {
    sizeof(BhpPluginV1), 1, "hostsim", "1.0",
    create_backend, destroy_backend, device_count, describe_device,
    open_device, close_device, list_ops,
    allocate, free_buffer,
    write_buffer, read_buffer, copy_buffer,
    create_kernel, destroy_kernel, compute,
    open_session, close_session, begin_run, flush, end_run,
    counters};

/* Built three ways for the tests: the plugin; -DHOSTSIM_ABI=2, a plugin from the future
 * that speaks only ABI version 2; -DHOSTSIM_ENTRY=other_name, a library without the
 * entry. */
#ifndef HOSTSIM_ABI
#define HOSTSIM_ABI 1
#endif
#ifndef HOSTSIM_ENTRY
#define HOSTSIM_ENTRY bh_backend_plugin_entry
#endif

BHP_EXPORT int32_t HOSTSIM_ENTRY(const uint32_t* host_versions, uint32_t n, uint32_t* chosen, const void** table) {
  for (uint32_t i = 0; i < n; ++i)
    if (host_versions[i] == HOSTSIM_ABI) {
      *chosen = HOSTSIM_ABI;
      *table = &kTable;
      return 0;
    }
  *chosen = HOSTSIM_ABI;
  return 1;
}
