/* The C API, from C: every real model against its reference outputs, and every error path
 * (bad files, wrong names, types and shapes, NULL arguments, handles of the wrong kind or
 * already released), with out-parameters left untouched on error.
 *
 * usage: capi_test SHARED_DIR   (exits 0 when every check passed)
 */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bulkhead/bulkhead.h>

#include "npy.h"

static const BhApi* bh;
static int failures = 0;
static const char* shared;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

/* Expects success; prints the message otherwise. */
#define OK(call)                                                                              \
  do {                                                                                        \
    BhStatus* st_ = (call);                                                                   \
    if (st_) {                                                                                \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, bh->status_message(st_)); \
      bh->release_status(st_);                                                                \
      ++failures;                                                                             \
    }                                                                                         \
  } while (0)

/* Expects an error with `code` whose message contains `needle`. */
static void expect_error(BhStatus* st, BhStatusCode code, const char* needle, const char* what, int line) {
  if (!st) {
    fprintf(stderr, "line %d: %s: expected an error, got success\n", line, what);
    ++failures;
    return;
  }
  if (bh->status_code(st) != code || !strstr(bh->status_message(st), needle)) {
    fprintf(stderr, "line %d: %s: expected code %d containing '%s', got %d: %s\n", line, what, (int)code, needle,
            (int)bh->status_code(st), bh->status_message(st));
    ++failures;
  }
  if (strchr(bh->status_message(st), '\n')) {
    fprintf(stderr, "line %d: %s: the message is more than one line\n", line, what);
    ++failures;
  }
  bh->release_status(st);
}
#define ERR(call, code, needle) expect_error((call), (code), (needle), #call, __LINE__)

static int released_count = 0;
static void count_release(void* user, void* data) {
  (void)data;
  ++*(int*)user;
}
static void free_release(void* user, void* data) {
  (void)user;
  free(data);
}

static BhTensor* load_npy(const char* path) {
  NpyArray a;
  char err[512];
  BhTensor* t = NULL;
  if (npy_read(path, &a, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    ++failures;
    return NULL;
  }
  OK(bh->create_tensor_borrowed(a.type, a.dims, a.rank, a.data, a.size, free_release, NULL, &t));
  return t;
}

/* Largest |a - b| of two float32 tensors; INFINITY when their shapes differ. */
static double max_diff(const BhTensor* a, const BhTensor* b) {
  const int64_t *da, *db;
  size_t ra, rb, i;
  int64_t n;
  void *pa, *pb;
  double worst = 0;
  OK(bh->tensor_shape(a, &da, &ra));
  OK(bh->tensor_shape(b, &db, &rb));
  if (ra != rb || memcmp(da, db, ra * sizeof *da) != 0) return INFINITY;
  OK(bh->tensor_element_count(a, &n));
  OK(bh->tensor_data(a, &pa));
  OK(bh->tensor_data(b, &pb));
  for (i = 0; i < (size_t)n; ++i) {
    double d = fabs((double)((float*)pa)[i] - (double)((float*)pb)[i]);
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

/* Loads models/NAME, runs it on its inputs and compares every output with the reference. */
static void real_model(BhEnv* env, const char* name, double tolerance, const char* isolation) {
  char path[4096];
  BhSessionOptions* o = NULL;
  BhSession* s = NULL;
  size_t n_in = 0, n_out = 0, i;
  const char* in_names[8];
  const BhTensor* in[8];
  BhTensor* out[8];
  OK(bh->create_session_options(&o));
  OK(bh->session_options_set_threads(o, 1));
  if (isolation) OK(bh->session_options_set_isolation(o, isolation));
  snprintf(path, sizeof path, "%s/models/%s/model.onnx", shared, name);
  OK(bh->create_session(env, path, o, &s));
  bh->release_session_options(o); /* the session keeps a copy */
  if (!s) return;
  OK(bh->session_io_count(s, BH_INPUT, &n_in));
  OK(bh->session_io_count(s, BH_OUTPUT, &n_out));
  CHECK(n_in >= 1 && n_in <= 8 && n_out >= 1 && n_out <= 8);
  for (i = 0; i < n_in; ++i) {
    OK(bh->session_io_name(s, BH_INPUT, i, &in_names[i]));
    snprintf(path, sizeof path, "%s/models/%s/inputs/%s.npy", shared, name, in_names[i]);
    in[i] = load_npy(path);
  }
  OK(bh->run(s, NULL, in_names, in, n_in, NULL, n_out, out));
  for (i = 0; i < n_out; ++i) {
    const char* oname;
    BhTensor* ref;
    double d;
    OK(bh->session_io_name(s, BH_OUTPUT, i, &oname));
    snprintf(path, sizeof path, "%s/models/%s/outputs/%s.npy", shared, name, oname);
    ref = load_npy(path);
    d = max_diff(out[i], ref);
    printf("%-14s %-10s %-20s max|diff| %.3g\n", name, isolation ? isolation : "in-process", oname, d);
    CHECK(d <= tolerance);
    bh->release_tensor(ref);
    bh->release_tensor(out[i]);
  }
  if (isolation) {
    int64_t pid = 0;
    OK(bh->session_worker_pid(s, &pid));
    CHECK(pid > 0 && pid != getpid());
  } else {
    size_t n_mem = 0;
    BhMemoryUsage use;
    const char* dev = NULL;
    OK(bh->session_memory_count(s, &n_mem));
    CHECK(n_mem >= 1);
    OK(bh->session_memory(s, 0, &dev, &use));
    CHECK(dev && strlen(dev) > 0 && use.peak > 0);
  }
  for (i = 0; i < n_in; ++i) bh->release_tensor((BhTensor*)in[i]);
  bh->release_session(s);
}

static BhSession* silero(BhEnv* env) {
  char path[4096];
  BhSession* s = NULL;
  snprintf(path, sizeof path, "%s/models/silero_vad_v5/model.onnx", shared);
  OK(bh->create_session(env, path, NULL, &s));
  return s;
}

/* Version 2: backend plugins (tests/plugin/hostsim.c). */
static void backend_plugins(void) {
  BhEnv* env = NULL;
  const char* names = NULL;
  BhSessionOptions* o = NULL;
  BhSession* s = NULL;
  void* lib;
  BhBackendEntryFn entry;
  OK(bh->create_env(&env));
  ERR(bh->env_load_backend(env, "/nonexistent/libx.so", NULL), BH_NOT_FOUND, "cannot be loaded");
  ERR(bh->env_load_backend(env, HOSTSIM_FUTURE, NULL), BH_UNSUPPORTED, "speaks backend plugin ABI version 2");
  ERR(bh->env_load_backend(env, HOSTSIM_PLUGIN, "bogus=1"), BH_INVALID_ARGUMENT, "unknown option 'bogus'");
  ERR(bh->env_load_backend(NULL, HOSTSIM_PLUGIN, NULL), BH_INVALID_ARGUMENT, "NULL");
  ERR(bh->env_load_backend(env, NULL, NULL), BH_INVALID_ARGUMENT, "path is NULL");
  OK(bh->env_load_backend(env, HOSTSIM_PLUGIN, "devices=2"));
  OK(bh->env_backends(env, &names));
  CHECK(names && strstr(names, "hostsim") != NULL);
  OK(bh->create_session_options(&o));
  OK(bh->session_options_set_devices(o, "hostsim:1,cpu"));
  {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/silero_vad_v5/model.onnx", shared);
    OK(bh->create_session(env, path, o, &s));
  }
  OK(bh->env_unload_backend(env, "hostsim"));
  ERR(bh->env_unload_backend(env, "hostsim"), BH_NOT_FOUND, "hostsim");
  ERR(bh->env_unload_backend(env, "cpu"), BH_FAILED_PRECONDITION, "built in");
  OK(bh->env_backends(env, &names));
  CHECK(names && strstr(names, "hostsim") == NULL);
  bh->release_session(s); /* the last user: the library closes */
  lib = dlopen(HOSTSIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  CHECK(lib == NULL);
  if (lib) dlclose(lib);
  /* A library the host loaded: bulkhead never closes it. */
  lib = dlopen(HOSTSIM_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL);
  if (lib) {
    *(void**)&entry = dlsym(lib, "bh_backend_plugin_entry");
    CHECK(entry != NULL);
    ERR(bh->env_add_backend_library(env, NULL, "x", NULL), BH_INVALID_ARGUMENT, "entry is NULL");
    OK(bh->env_add_backend_library(env, entry, "my hostsim", NULL));
    OK(bh->env_unload_backend(env, "hostsim"));
  }
  bh->release_session_options(o);
  bh->release_env(env);
  if (lib) {
    void* again = dlopen(HOSTSIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
    CHECK(again != NULL);
    if (again) dlclose(again);
    dlclose(lib);
  }
}

static void versions(void) {
  CHECK(bh_get_api(0) == NULL);
  CHECK(bh_get_api(BH_API_VERSION + 1) == NULL);
  CHECK(bh_get_api(1) == bh);
  CHECK(bh_get_api(2) == bh);
  CHECK(bh_get_api(3) == bh);
  CHECK(bh_api_version() >= 1);
  CHECK(strlen(bh->version_string()) > 0);
  CHECK(bh->status_code(NULL) == BH_OK);
  CHECK(strcmp(bh->status_message(NULL), "") == 0);
  bh->release_status(NULL); /* every release accepts NULL */
  bh->release_env(NULL);
  bh->release_session(NULL);
  bh->release_tensor(NULL);
  bh->release_session_options(NULL);
  bh->release_run_options(NULL);
  bh->release_device_list(NULL);
}

static void environments(void) {
  BhEnv *a = NULL, *b = NULL;
  const char* backends = NULL;
  BhDeviceList* list = NULL;
  const char *name = NULL, *backend = NULL, *desc = NULL, *policy = NULL;
  size_t open = 99;
  OK(bh->create_env(&a));
  OK(bh->create_env(&b)); /* several per process */
  OK(bh->env_backends(a, &backends));
  CHECK(backends && strstr(backends, "cpu"));
  OK(bh->env_devices(a, &list));
  CHECK(bh->device_list_count(list) >= 1);
  OK(bh->device_list_get(list, 0, &name, &backend, &desc, &policy));
  CHECK(name && strcmp(name, "cpu:0") == 0 && strcmp(backend, "cpu") == 0 && desc && policy);
  name = "untouched";
  ERR(bh->device_list_get(list, 1000, &name, NULL, NULL, NULL), BH_INVALID_ARGUMENT, "out of range");
  CHECK(strcmp(name, "untouched") == 0);
  bh->release_device_list(list);
  OK(bh->env_open_device_count(a, &open));
  CHECK(open == 0);
  ERR(bh->create_env(NULL), BH_INVALID_ARGUMENT, "NULL");
  ERR(bh->env_backends(NULL, &backends), BH_INVALID_ARGUMENT, "'env' is NULL");
  ERR(bh->env_backends(a, NULL), BH_INVALID_ARGUMENT, "out-parameter");
  bh->release_env(b);
  bh->release_env(a);
}

static void options(void) {
  BhSessionOptions* o = NULL;
  OK(bh->create_session_options(&o));
  OK(bh->session_options_set_devices(o, "cpu"));
  OK(bh->session_options_set_threads(o, 2));
  OK(bh->session_options_set_optimization_level(o, 1));
  OK(bh->session_options_set_graph_capture(o, 0));
  OK(bh->session_options_set_submit_policy(o, "split"));
  OK(bh->session_options_set_isolation(o, "in-process"));
  OK(bh->session_options_set_worker_timeout_ms(o, 5000));
  OK(bh->session_options_set_max_tensor_bytes(o, 1 << 30));
  OK(bh->session_options_set_max_loop_iterations(o, 1000));
  OK(bh->session_options_set_run_timeout_ms(o, 60000));
  OK(bh->session_options_set_max_file_bytes(o, (uint64_t)1 << 32));
  OK(bh->session_options_apply(o, "threads=1;graph_capture=1"));
  ERR(bh->session_options_set_threads(o, -1), BH_INVALID_ARGUMENT, "threads");
  ERR(bh->session_options_set_threads(o, 100000), BH_INVALID_ARGUMENT, "threads");
  ERR(bh->session_options_set_optimization_level(o, 7), BH_INVALID_ARGUMENT, "optimization_level");
  ERR(bh->session_options_set_graph_capture(o, 2), BH_INVALID_ARGUMENT, "0 or 1");
  ERR(bh->session_options_set_isolation(o, "thread"), BH_INVALID_ARGUMENT, "isolation");
  ERR(bh->session_options_set_worker_timeout_ms(o, 0), BH_INVALID_ARGUMENT, "worker_timeout_ms");
  ERR(bh->session_options_set_devices(o, "cpu,,vulkan"), BH_INVALID_ARGUMENT, "empty entry");
  ERR(bh->session_options_set_devices(o, ""), BH_INVALID_ARGUMENT, "empty");
  ERR(bh->session_options_set_devices(o, NULL), BH_INVALID_ARGUMENT, "NULL");
  ERR(bh->session_options_set_max_loop_iterations(o, -5), BH_INVALID_ARGUMENT, "max_loop_iterations");
  ERR(bh->session_options_set_run_timeout_ms(o, -5), BH_INVALID_ARGUMENT, "run_timeout_ms");
  ERR(bh->session_options_apply(o, "threads=1;nope=3"), BH_INVALID_ARGUMENT, "unknown session option 'nope'");
  ERR(bh->session_options_apply(o, "threads=x"), BH_INVALID_ARGUMENT, "threads");
  OK(bh->session_options_apply(o, "optimization_level=2;precision=bf16"));
  ERR(bh->session_options_apply(o, "optimization_level=1"), BH_INVALID_ARGUMENT, "needs optimization_level 2");
  ERR(bh->session_options_apply(o, "precision=fp16"), BH_INVALID_ARGUMENT, "expected fp32 or bf16");
  OK(bh->session_options_apply(o, "precision=fp32"));
  ERR(bh->session_options_set_threads(NULL, 1), BH_INVALID_ARGUMENT, "'options' is NULL");
  ERR(bh->create_session_options(NULL), BH_INVALID_ARGUMENT, "NULL");
  bh->release_session_options(o);
}

static void bad_files(BhEnv* env) {
  BhSession* s = (BhSession*)0x1; /* out-parameters stay untouched on error */
  char path[4096];
  FILE* f;
  ERR(bh->create_session(env, "/nonexistent/model.onnx", NULL, &s), BH_NOT_FOUND, "/nonexistent/model.onnx");
  CHECK(s == (BhSession*)0x1);
  snprintf(path, sizeof path, "/tmp/bulkhead-capi-test-%d.onnx", (int)getpid());
  f = fopen(path, "wb");
  fputs("this is not an ONNX model", f);
  fclose(f);
  ERR(bh->create_session(env, path, NULL, &s), BH_INVALID_MODEL, "bulkhead-capi-test");
  CHECK(s == (BhSession*)0x1);
  unlink(path);
  ERR(bh->create_session(env, "/dev/zero", NULL, &s), BH_INVALID_ARGUMENT, "not a regular file");
  ERR(bh->create_session(env, "/tmp", NULL, &s), BH_INVALID_ARGUMENT, "directory");
  ERR(bh->create_session_from_bytes(env, "garbage", 7, "mine", NULL, &s), BH_INVALID_MODEL, "mine");
  ERR(bh->create_session_from_bytes(env, NULL, 7, "mine", NULL, &s), BH_INVALID_ARGUMENT, "'bytes' is NULL");
  ERR(bh->create_session(NULL, "x.onnx", NULL, &s), BH_INVALID_ARGUMENT, "'env' is NULL");
  ERR(bh->create_session(env, NULL, NULL, &s), BH_INVALID_ARGUMENT, "'path' is NULL");
  ERR(bh->create_session(env, "", NULL, &s), BH_INVALID_ARGUMENT, "empty");
  ERR(bh->create_session(env, "x.onnx", NULL, NULL), BH_INVALID_ARGUMENT, "out-parameter");
  CHECK(s == (BhSession*)0x1);
  {
    BhSessionOptions* o = NULL;
    OK(bh->create_session_options(&o));
    OK(bh->session_options_set_devices(o, "nosuch"));
    snprintf(path, sizeof path, "%s/models/silero_vad_v5/model.onnx", shared);
    ERR(bh->create_session(env, path, o, &s), BH_NOT_FOUND, "nosuch");
    bh->release_session_options(o);
  }
}

static void bad_runs(BhEnv* env) {
  BhSession* s = silero(env);
  BhTensor *input = NULL, *state = NULL, *sr = NULL, *wrong_type = NULL, *wrong_shape = NULL, *out[2];
  int64_t in_dims[2] = {1, 576}, state_dims[3] = {2, 1, 128}, bad_dims[2] = {1, 7};
  const char* names[3] = {"input", "state", "sr"};
  const BhTensor* ins[3];
  const char* unknown[3] = {"input", "state", "nope"};
  const char* twice[3] = {"input", "state", "state"};
  const char* one_output[1] = {"stateN"};
  const char* bad_output[1] = {"nope"};
  int64_t* srp;
  size_t n;
  const int64_t* dims;
  int64_t rank;
  const char* dim_name;
  BhElementType type;
  BhValueKind kind;
  if (!s) return;
  OK(bh->create_tensor(BH_TYPE_FLOAT32, in_dims, 2, &input));
  OK(bh->create_tensor(BH_TYPE_FLOAT32, state_dims, 3, &state));
  OK(bh->create_tensor(BH_TYPE_INT64, NULL, 0, &sr));
  OK(bh->tensor_data(sr, (void**)&srp));
  *srp = 16000;
  OK(bh->create_tensor(BH_TYPE_INT64, in_dims, 2, &wrong_type));
  OK(bh->create_tensor(BH_TYPE_FLOAT32, bad_dims, 2, &wrong_shape));
  ins[0] = input;
  ins[1] = state;
  ins[2] = sr;

  /* metadata */
  OK(bh->session_io_count(s, BH_INPUT, &n));
  CHECK(n == 3);
  OK(bh->session_io_shape(s, BH_INPUT, 0, &dims, &rank));
  CHECK(rank == 2 && (dims[0] == 1 || dims[0] == -1));
  OK(bh->session_io_element_type(s, BH_INPUT, 2, &type));
  CHECK(type == BH_TYPE_INT64);
  OK(bh->session_io_value_kind(s, BH_OUTPUT, 0, &kind));
  CHECK(kind == BH_VALUE_TENSOR);
  OK(bh->session_io_dim_name(s, BH_INPUT, 0, 0, &dim_name));
  CHECK(dim_name != NULL);
  ERR(bh->session_io_name(s, BH_INPUT, 3, &dim_name), BH_INVALID_ARGUMENT, "out of range: the session has 3 inputs");
  ERR(bh->session_io_name(s, (BhIoSide)7, 0, &dim_name), BH_INVALID_ARGUMENT, "neither");
  ERR(bh->session_io_dim_name(s, BH_INPUT, 2, 0, &dim_name), BH_INVALID_ARGUMENT, "no dimension 0");
  OK(bh->session_placement_count(s, &n));
  CHECK(n >= 1);

  /* good run, one chosen output */
  out[0] = (BhTensor*)0x1;
  OK(bh->run(s, NULL, names, ins, 3, one_output, 1, out));
  CHECK(out[0] != (BhTensor*)0x1);
  {
    const int64_t* od;
    size_t orank;
    BhMemoryKind mk;
    const char* where;
    OK(bh->tensor_shape(out[0], &od, &orank));
    CHECK(orank == 3 && od[0] == 2 && od[2] == 128);
    OK(bh->tensor_location(out[0], &mk, &where));
    CHECK(mk == BH_MEMORY_HOST && strcmp(where, "host") == 0);
  }
  bh->release_tensor(out[0]);

  /* wrong inputs: each a status, outputs untouched */
  out[0] = out[1] = (BhTensor*)0x1;
  ERR(bh->run(s, NULL, unknown, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "unknown input 'nope'");
  ERR(bh->run(s, NULL, twice, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "given twice");
  ERR(bh->run(s, NULL, names, ins, 2, NULL, 2, out), BH_INVALID_ARGUMENT, "missing input 'sr'");
  ins[0] = wrong_type;
  ERR(bh->run(s, NULL, names, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "element type");
  ins[0] = wrong_shape;
  ERR(bh->run(s, NULL, names, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "input");
  ins[0] = input;
  ERR(bh->run(s, NULL, names, ins, 3, bad_output, 1, out), BH_INVALID_ARGUMENT, "unknown output 'nope'");
  ERR(bh->run(s, NULL, names, ins, 3, NULL, 1, out), BH_INVALID_ARGUMENT, "the model has 2 outputs");
  ERR(bh->run(s, NULL, names, ins, 3, NULL, 2, NULL), BH_INVALID_ARGUMENT, "'outputs' is NULL");
  ERR(bh->run(s, NULL, NULL, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "'input_names' is NULL");
  ERR(bh->run(NULL, NULL, names, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "'session' is NULL");
  {
    const char* null_name[3] = {"input", NULL, "sr"};
    ERR(bh->run(s, NULL, null_name, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "input_names[1] is NULL");
  }
  CHECK(out[0] == (BhTensor*)0x1 && out[1] == (BhTensor*)0x1);

  /* a handle of the wrong kind, and one already released */
  ERR(bh->run((const BhSession*)input, NULL, names, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT,
      "is a tensor handle, not a session handle");
  {
    BhTensor* gone = NULL;
    OK(bh->create_tensor(BH_TYPE_FLOAT32, in_dims, 2, &gone));
    bh->release_tensor(gone);
    ins[0] = gone;
    ERR(bh->run(s, NULL, names, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "inputs[0]' is a released tensor handle");
    ERR(bh->tensor_shape(gone, &dims, &n), BH_INVALID_ARGUMENT, "released tensor handle");
    bh->release_tensor(gone); /* a second release is ignored */
    ins[0] = input;
  }

  /* run options: a time limit */
  {
    BhRunOptions* ro = NULL;
    OK(bh->create_run_options(&ro));
    OK(bh->run_options_set_timeout_ms(ro, 60000));
    ERR(bh->run_options_set_timeout_ms(ro, -3), BH_INVALID_ARGUMENT, "timeout");
    OK(bh->run(s, ro, names, ins, 3, NULL, 2, out));
    bh->release_tensor(out[0]);
    bh->release_tensor(out[1]);
    ERR(bh->run(s, (const BhRunOptions*)s, names, ins, 3, NULL, 2, out), BH_INVALID_ARGUMENT, "not a run options handle");
    bh->release_run_options(ro);
  }

  bh->release_session(s);
  ERR(bh->session_io_count(s, BH_INPUT, &n), BH_INVALID_ARGUMENT, "released session handle");
  bh->release_tensor(input);
  bh->release_tensor(state);
  bh->release_tensor(sr);
  bh->release_tensor(wrong_type);
  bh->release_tensor(wrong_shape);
}

static void tensors(BhEnv* env) {
  BhTensor* t = (BhTensor*)0x1;
  int64_t dims[2] = {2, 3}, neg[2] = {2, -3}, huge[3] = {1 << 30, 1 << 30, 1 << 30};
  float* buf = (float*)aligned_alloc(64, 64);
  const char* words[3] = {"alpha", "", "gamma\xc3\xa9"};
  const char* s;
  size_t len;
  ERR(bh->create_tensor(BH_TYPE_FLOAT32, neg, 2, &t), BH_INVALID_ARGUMENT, "dimension 1 is -3");
  ERR(bh->create_tensor(BH_TYPE_FLOAT32, huge, 3, &t), BH_INVALID_ARGUMENT, "");
  ERR(bh->create_tensor((BhElementType)99, dims, 2, &t), BH_INVALID_ARGUMENT, "element type 99");
  ERR(bh->create_tensor(BH_TYPE_FLOAT32, NULL, 2, &t), BH_INVALID_ARGUMENT, "'dims' is NULL");
  ERR(bh->create_tensor(BH_TYPE_STRING, dims, 2, &t), BH_INVALID_ARGUMENT, "create_string_tensor");
  ERR(bh->create_tensor_borrowed(BH_TYPE_FLOAT32, dims, 2, buf, 20, count_release, &released_count, &t),
      BH_INVALID_ARGUMENT, "needs 24 bytes");
  ERR(bh->create_tensor_borrowed(BH_TYPE_FLOAT32, dims, 2, (char*)buf + 1, 24, count_release, &released_count, &t),
      BH_INVALID_ARGUMENT, "not aligned");
  ERR(bh->create_tensor_borrowed(BH_TYPE_FLOAT32, dims, 2, NULL, 24, NULL, NULL, &t), BH_INVALID_ARGUMENT, "'data' is NULL");
  CHECK(t == (BhTensor*)0x1);
  CHECK(released_count == 0); /* a refused borrow never calls back */

  /* a borrowed tensor calls back once, when released */
  OK(bh->create_tensor_borrowed(BH_TYPE_FLOAT32, dims, 2, buf, 24, count_release, &released_count, &t));
  {
    void* p;
    OK(bh->tensor_data(t, &p));
    CHECK(p == buf); /* no copy */
  }
  CHECK(released_count == 0);
  bh->release_tensor(t);
  CHECK(released_count == 1);
  free(buf);

  /* strings */
  OK(bh->create_string_tensor(words, 3, (int64_t[]){3}, 1, &t));
  OK(bh->tensor_string(t, 2, &s, &len));
  CHECK(len == 7 && strcmp(s, "gamma\xc3\xa9") == 0);
  ERR(bh->tensor_string(t, 3, &s, &len), BH_INVALID_ARGUMENT, "out of range");
  ERR(bh->tensor_data(t, (void**)&s), BH_FAILED_PRECONDITION, "tensor_string");
  bh->release_tensor(t);
  ERR(bh->create_string_tensor(words, 2, (int64_t[]){3}, 1, &t), BH_INVALID_ARGUMENT, "holds 3 strings");

  /* process-level copies: host -> cpu device -> host, and through vulkan:0 when present */
  {
    BhTensor *src = NULL, *mid = NULL, *back = NULL, *other = NULL;
    float* p;
    int i;
    const char* devices[2] = {"cpu", "vulkan:0"};
    int d, n_devices = 2;
#if defined(BULKHEAD_SANITIZE_ADDRESS)
    /* Under ASan the Vulkan driver (Mesa) is left out, as vulkan_test is from the ASan
     * stage: LeakSanitizer would judge the driver's allocations, not bulkhead's. */
    n_devices = 1;
    printf("copy through vulkan:0: skipped under AddressSanitizer\n");
#endif
    OK(bh->create_tensor(BH_TYPE_FLOAT32, dims, 2, &src));
    OK(bh->tensor_data(src, (void**)&p));
    for (i = 0; i < 6; ++i) p[i] = (float)i * 1.5f;
    for (d = 0; d < n_devices; ++d) {
      BhStatus* st = bh->create_device_tensor(env, devices[d], BH_TYPE_FLOAT32, dims, 2, &mid);
      if (st) {
        CHECK(d == 1); /* no Vulkan device on this machine */
        printf("copy through %s: skipped (%s)\n", devices[d], bh->status_message(st));
        bh->release_status(st);
        continue;
      }
      OK(bh->create_tensor(BH_TYPE_FLOAT32, dims, 2, &back));
      OK(bh->copy(env, src, mid));
      OK(bh->copy(env, mid, back));
      CHECK(max_diff(src, back) == 0);
      if (d == 1) {
        BhMemoryKind kind;
        void* q;
        OK(bh->tensor_location(mid, &kind, NULL));
        if (kind == BH_MEMORY_DEVICE_LOCAL) ERR(bh->tensor_data(mid, &q), BH_FAILED_PRECONDITION, "device-local");
        printf("copy through %s: ok\n", devices[d]);
      }
      bh->release_tensor(mid);
      bh->release_tensor(back);
    }
    OK(bh->create_tensor(BH_TYPE_INT32, dims, 2, &other));
    ERR(bh->copy(env, src, other), BH_INVALID_ARGUMENT, "differ");
    ERR(bh->copy(env, src, NULL), BH_INVALID_ARGUMENT, "'dst' is NULL");
    ERR(bh->create_device_tensor(env, "nosuch:3", BH_TYPE_FLOAT32, dims, 2, &mid), BH_NOT_FOUND, "nosuch");
    bh->release_tensor(other);
    bh->release_tensor(src);
  }
}

/* A host tensor of `session`'s own (session_create_input_tensor) holding a copy of `src`. */
static BhTensor* input_copy(const BhSession* session, const BhTensor* src) {
  BhElementType type;
  const int64_t* dims;
  size_t rank, bytes;
  void *from, *to;
  BhTensor* t = NULL;
  OK(bh->tensor_element_type(src, &type));
  OK(bh->tensor_shape(src, &dims, &rank));
  OK(bh->tensor_byte_size(src, &bytes));
  OK(bh->session_create_input_tensor(session, type, dims, rank, &t));
  if (!t) return NULL;
  OK(bh->tensor_data(src, &from));
  OK(bh->tensor_data(t, &to));
  memcpy(to, from, bytes);
  return t;
}

/* Version 3: silero as a pipeline of two sessions in worker processes, the first run's
 * state handed to the second without a copy (run_options_set_outputs_for) and the other
 * inputs written by the caller into session_create_input_tensor; the same results as
 * in-process. And its errors. */
static void handoffs(BhEnv* env) {
  char path[4096];
  const char* names[3] = {"input", "state", "sr"};
  BhSessionOptions *po = NULL, *lo = NULL;
  BhSession *f = NULL, *g = NULL, *local = NULL;
  BhRunOptions* ro = NULL;
  BhTensor *npy[3], *fin[3], *gin[3], *fout[2] = {NULL, NULL}, *gout[2] = {NULL, NULL};
  BhTensor *lmid[2] = {NULL, NULL}, *lout[2] = {NULL, NULL}, *t = NULL;
  const BhTensor* lin[3];
  const int64_t bad_dims[2] = {2, -3};
  size_t i;
  OK(bh->create_session_options(&po));
  OK(bh->session_options_set_threads(po, 1));
  OK(bh->session_options_set_isolation(po, "process"));
  OK(bh->create_session_options(&lo));
  OK(bh->session_options_set_threads(lo, 1));
  snprintf(path, sizeof path, "%s/models/silero_vad_v5/model.onnx", shared);
  OK(bh->create_session(env, path, po, &f));
  OK(bh->create_session(env, path, po, &g));
  OK(bh->create_session(env, path, lo, &local));
  bh->release_session_options(po);
  bh->release_session_options(lo);
  if (!f || !g || !local) return;
  for (i = 0; i < 3; ++i) {
    snprintf(path, sizeof path, "%s/models/silero_vad_v5/inputs/%s.npy", shared, names[i]);
    npy[i] = load_npy(path);
    fin[i] = input_copy(f, npy[i]);
    gin[i] = input_copy(g, npy[i]);
    lin[i] = npy[i];
  }
  OK(bh->create_run_options(&ro));
  OK(bh->run_options_set_outputs_for(ro, g));
  OK(bh->run(f, ro, names, (const BhTensor* const*)fin, 3, NULL, 2, fout));
  OK(bh->run(local, NULL, names, lin, 3, NULL, 2, lmid));
  if (fout[1] && lmid[1]) {
    const BhTensor* g_in[3] = {gin[0], fout[1], gin[2]};
    const BhTensor* l_in[3] = {npy[0], lmid[1], npy[2]};
    OK(bh->run(g, NULL, names, g_in, 3, NULL, 2, gout));
    OK(bh->run(local, NULL, names, l_in, 3, NULL, 2, lout));
    for (i = 0; i < 2; ++i) {
      CHECK(max_diff(fout[i], lmid[i]) <= 1e-6);
      CHECK(gout[i] && lout[i] && max_diff(gout[i], lout[i]) <= 1e-6);
    }
    if (gout[1] && lout[1])
      printf("silero_vad_v5  pipeline   stateN (lent)        max|diff| %.3g\n", max_diff(gout[1], lout[1]));
  }
  /* The options keep G's model alive: F still runs with them after G's handle goes. */
  bh->release_session(g);
  for (i = 0; i < 2; ++i) bh->release_tensor(fout[i]);
  OK(bh->run(f, ro, names, (const BhTensor* const*)fin, 3, NULL, 2, fout));
  OK(bh->run_options_set_outputs_for(ro, NULL));
  /* Errors: one line each, out-parameters untouched. */
  ERR(bh->run_options_set_outputs_for(NULL, f), BH_INVALID_ARGUMENT, "'options' is NULL");
  ERR(bh->run_options_set_outputs_for(ro, g), BH_INVALID_ARGUMENT, "released session handle");
  ERR(bh->run_options_set_outputs_for(ro, (const BhSession*)ro), BH_INVALID_ARGUMENT, "not a session handle");
  ERR(bh->session_create_input_tensor(f, BH_TYPE_STRING, NULL, 0, &t), BH_INVALID_ARGUMENT, "string");
  ERR(bh->session_create_input_tensor(f, BH_TYPE_FLOAT32, bad_dims, 2, &t), BH_INVALID_ARGUMENT, "session_create_input_tensor");
  ERR(bh->session_create_input_tensor(f, (BhElementType)99, NULL, 0, &t), BH_INVALID_ARGUMENT, "unknown");
  ERR(bh->session_create_input_tensor(f, BH_TYPE_FLOAT32, NULL, 0, NULL), BH_INVALID_ARGUMENT, "'out'");
  ERR(bh->session_create_input_tensor(NULL, BH_TYPE_FLOAT32, NULL, 0, &t), BH_INVALID_ARGUMENT, "'session' is NULL");
  CHECK(t == NULL);
  /* In-process: an ordinary host tensor, zeroed. */
  {
    const int64_t d[1] = {4};
    float* p = NULL;
    OK(bh->session_create_input_tensor(local, BH_TYPE_FLOAT32, d, 1, &t));
    if (t) {
      OK(bh->tensor_data(t, (void**)&p));
      CHECK(p && p[0] == 0 && p[3] == 0);
    }
    bh->release_tensor(t);
  }
  for (i = 0; i < 2; ++i) {
    bh->release_tensor(fout[i]);
    bh->release_tensor(gout[i]);
    bh->release_tensor(lmid[i]);
    bh->release_tensor(lout[i]);
  }
  for (i = 0; i < 3; ++i) {
    bh->release_tensor(npy[i]);
    bh->release_tensor(fin[i]);
    bh->release_tensor(gin[i]);
  }
  bh->release_run_options(ro);
  bh->release_session(f);
  bh->release_session(local);
}

int main(int argc, char** argv) {
  BhEnv* env = NULL;
  if (argc != 2) {
    fprintf(stderr, "usage: capi_test SHARED_DIR\n");
    return 2;
  }
  shared = argv[1];
  {
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/models/silero_vad_v5/model.onnx", shared);
    if (access(probe, R_OK) != 0) {
      fprintf(stderr, "capi_test: the shared test data is missing: %s\n", probe);
      return 1;
    }
  }
  bh = bh_get_api(BH_API_VERSION);
  if (!bh) {
    fprintf(stderr, "capi_test: bh_get_api(%d) returned NULL\n", BH_API_VERSION);
    return 1;
  }
  versions();
  backend_plugins();
  environments();
  options();
  OK(bh->create_env(&env));
  bad_files(env);
  bad_runs(env);
  tensors(env);
  real_model(env, "ppocrv4_det", 1e-4, NULL);
  real_model(env, "ppocrv4_rec", 1e-4, NULL);
  real_model(env, "silero_vad_v5", 1e-5, NULL);
  real_model(env, "silero_vad_v5", 1e-5, "process");
  handoffs(env);
  bh->release_env(env);
  if (failures) {
    fprintf(stderr, "capi_test: %d checks failed\n", failures);
    return 1;
  }
  printf("capi_test: all checks passed\n");
  return 0;
}
