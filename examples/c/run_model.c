/* run_model: loads an ONNX model with bulkhead's C API, runs it on .npy inputs, prints
 * each output, and optionally compares the outputs with reference .npy files.
 *
 *   run_model MODEL.onnx NAME=FILE.npy... [--device vulkan:0,cpu] [--threads N]
 *             [--isolation process] [--expect DIR] [--tolerance T]
 *
 * Inputs are passed without a copy (create_tensor_borrowed). With --expect, output NAME
 * is compared with DIR/NAME.npy and the program exits 1 when any element differs by more
 * than the tolerance (default 1e-4). Any error: one line on stderr, exit 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bulkhead/bulkhead.h>

#include "npy.h"

#define MAX_IO 64

static const BhApi* bh;

/* Prints a failed status and exits. */
static void check(BhStatus* st, const char* what) {
  if (!st) return;
  fprintf(stderr, "run_model: %s: %s\n", what, bh->status_message(st));
  bh->release_status(st);
  exit(1);
}

static void free_npy(void* user, void* data) {
  (void)user;
  free(data);
}

static double element(const void* data, BhElementType t, size_t i) {
  switch (t) {
    case BH_TYPE_FLOAT32: return ((const float*)data)[i];
    case BH_TYPE_FLOAT64: return ((const double*)data)[i];
    case BH_TYPE_INT64: return (double)((const int64_t*)data)[i];
    case BH_TYPE_INT32: return ((const int32_t*)data)[i];
    case BH_TYPE_INT8: return ((const int8_t*)data)[i];
    case BH_TYPE_UINT8: case BH_TYPE_BOOL: return ((const uint8_t*)data)[i];
    default: return NAN;
  }
}

int main(int argc, char** argv) {
  const char* model = NULL;
  const char* names[MAX_IO];
  const BhTensor* inputs[MAX_IO];
  size_t n_in = 0, n_out = 0, i, j;
  const char* expect = NULL;
  double tolerance = 1e-4;
  int failed = 0;
  BhEnv* env = NULL;
  BhSessionOptions* opts = NULL;
  BhSession* session = NULL;
  BhTensor* outputs[MAX_IO];
  char err[512];

  bh = bh_get_api(BH_API_VERSION);
  if (!bh) {
    fprintf(stderr, "run_model: this libbulkhead does not serve C API version %d\n", BH_API_VERSION);
    return 1;
  }
  check(bh->create_session_options(&opts), "options");
  for (i = 1; i < (size_t)argc; ++i) {
    const char* a = argv[i];
    const char* value = i + 1 < (size_t)argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--device") == 0 && value) {
      check(bh->session_options_set_devices(opts, value), "--device");
      ++i;
    } else if (strcmp(a, "--threads") == 0 && value) {
      check(bh->session_options_set_threads(opts, atoi(value)), "--threads");
      ++i;
    } else if (strcmp(a, "--isolation") == 0 && value) {
      check(bh->session_options_set_isolation(opts, value), "--isolation");
      ++i;
    } else if (strcmp(a, "--expect") == 0 && value) {
      expect = value;
      ++i;
    } else if (strcmp(a, "--tolerance") == 0 && value) {
      tolerance = atof(value);
      ++i;
    } else if (a[0] == '-') {
      fprintf(stderr, "run_model: unknown option '%s'\n", a);
      return 1;
    } else if (!model) {
      model = a;
    } else {
      const char* eq = strchr(a, '=');
      NpyArray arr;
      BhTensor* t = NULL;
      if (!eq || eq == a) {
        fprintf(stderr, "run_model: expected NAME=FILE.npy, got '%s'\n", a);
        return 1;
      }
      if (n_in == MAX_IO) {
        fprintf(stderr, "run_model: more than %d inputs\n", MAX_IO);
        return 1;
      }
      if (npy_read(eq + 1, &arr, err, sizeof err) != 0) {
        fprintf(stderr, "run_model: %s\n", err);
        return 1;
      }
      /* The tensor borrows the array's memory; bulkhead frees it when done. */
      check(bh->create_tensor_borrowed(arr.type, arr.dims, arr.rank, arr.data, arr.size, free_npy, NULL, &t), eq + 1);
      names[n_in] = strndup(a, (size_t)(eq - a));
      inputs[n_in++] = t;
    }
  }
  if (!model) {
    fprintf(stderr, "usage: run_model MODEL.onnx NAME=FILE.npy... [--device D] [--threads N] [--isolation process] "
                    "[--expect DIR] [--tolerance T]\n");
    return 1;
  }

  check(bh->create_env(&env), "environment");
  check(bh->create_session(env, model, opts, &session), model);
  check(bh->session_io_count(session, BH_OUTPUT, &n_out), "outputs");
  if (n_out > MAX_IO) {
    fprintf(stderr, "run_model: the model has more than %d outputs\n", MAX_IO);
    return 1;
  }
  check(bh->run(session, NULL, names, inputs, n_in, NULL, n_out, outputs), "run");

  for (i = 0; i < n_out; ++i) {
    const char* name;
    const int64_t* dims;
    size_t rank, size;
    int64_t count;
    BhElementType type;
    void* data;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    check(bh->session_io_name(session, BH_OUTPUT, i, &name), "output name");
    if (!outputs[i]) {
      printf("%s: none\n", name);
      continue;
    }
    check(bh->tensor_shape(outputs[i], &dims, &rank), name);
    check(bh->tensor_element_type(outputs[i], &type), name);
    check(bh->tensor_element_count(outputs[i], &count), name);
    check(bh->tensor_byte_size(outputs[i], &size), name);
    printf("%s: type %d [", name, (int)type);
    for (j = 0; j < rank; ++j) printf("%s%lld", j ? "," : "", (long long)dims[j]);
    printf("]");
    if (type == BH_TYPE_STRING) {
      printf(" (%lld strings)\n", (long long)count);
      continue;
    }
    check(bh->tensor_data(outputs[i], &data), name);
    for (j = 0; j < (size_t)count; ++j) {
      double v = element(data, type, j);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      sum += v;
    }
    printf(" min %.6g max %.6g mean %.6g", lo, hi, count ? sum / (double)count : 0.0);
    if (expect) {
      char path[4096];
      NpyArray ref;
      double worst = 0;
      snprintf(path, sizeof path, "%s/%s.npy", expect, name);
      if (npy_read(path, &ref, err, sizeof err) != 0) {
        fprintf(stderr, "\nrun_model: %s\n", err);
        return 1;
      }
      if (ref.type != type || ref.size != size || ref.rank != rank || memcmp(ref.dims, dims, rank * sizeof *dims) != 0) {
        printf(" DIFFERS from %s in type or shape\n", path);
        failed = 1;
        npy_free(&ref);
        continue;
      }
      for (j = 0; j < (size_t)count; ++j) {
        double d = fabs(element(data, type, j) - element(ref.data, type, j));
        if (!(d <= worst)) worst = d; /* NaN counts as a difference */
      }
      printf(" max|diff| %.3g %s", worst, worst <= tolerance ? "ok" : "TOO FAR");
      if (!(worst <= tolerance)) failed = 1;
      npy_free(&ref);
    }
    printf("\n");
  }

  for (i = 0; i < n_out; ++i) bh->release_tensor(outputs[i]);
  for (i = 0; i < n_in; ++i) {
    bh->release_tensor((BhTensor*)inputs[i]);
    free((void*)names[i]);
  }
  bh->release_session(session);
  bh->release_session_options(opts);
  bh->release_env(env);
  return failed;
}
