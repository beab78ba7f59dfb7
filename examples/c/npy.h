/* A small .npy reader and writer for the C examples and tests (C11, header only).
 *
 * Reads NumPy format versions 1-3, little-endian or single-byte element types, C order.
 * npy_read() allocates the data with malloc; the caller frees it with npy_free().
 * Errors come back as a message in `err`, never as a crash.
 */
#ifndef BULKHEAD_EXAMPLES_NPY_H_
#define BULKHEAD_EXAMPLES_NPY_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bulkhead/bulkhead.h>

#define NPY_MAX_RANK 16

typedef struct NpyArray {
  BhElementType type;
  int64_t dims[NPY_MAX_RANK];
  size_t rank;
  void* data; /* malloc'd, 64-byte aligned */
  size_t size; /* bytes */
} NpyArray;

static inline void npy_free(NpyArray* a) {
  free(a->data);
  a->data = NULL;
}

static inline size_t npy_type_size(BhElementType t) {
  switch (t) {
    case BH_TYPE_BOOL: case BH_TYPE_INT8: case BH_TYPE_UINT8: return 1;
    case BH_TYPE_INT16: case BH_TYPE_UINT16: case BH_TYPE_FLOAT16: case BH_TYPE_BFLOAT16: return 2;
    case BH_TYPE_INT32: case BH_TYPE_UINT32: case BH_TYPE_FLOAT32: return 4;
    case BH_TYPE_INT64: case BH_TYPE_UINT64: case BH_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

static inline const char* npy_descr(BhElementType t) {
  switch (t) {
    case BH_TYPE_BOOL: return "|b1";
    case BH_TYPE_INT8: return "|i1";
    case BH_TYPE_UINT8: return "|u1";
    case BH_TYPE_INT16: return "<i2";
    case BH_TYPE_UINT16: return "<u2";
    case BH_TYPE_FLOAT16: return "<f2";
    case BH_TYPE_INT32: return "<i4";
    case BH_TYPE_UINT32: return "<u4";
    case BH_TYPE_FLOAT32: return "<f4";
    case BH_TYPE_INT64: return "<i8";
    case BH_TYPE_UINT64: return "<u8";
    case BH_TYPE_FLOAT64: return "<f8";
    default: return NULL;
  }
}

static inline BhElementType npy_type_from_descr(const char* d) {
  static const BhElementType types[] = {BH_TYPE_BOOL,   BH_TYPE_INT8,   BH_TYPE_UINT8,   BH_TYPE_INT16,
                                        BH_TYPE_UINT16, BH_TYPE_FLOAT16, BH_TYPE_INT32,  BH_TYPE_UINT32,
                                        BH_TYPE_FLOAT32, BH_TYPE_INT64, BH_TYPE_UINT64,  BH_TYPE_FLOAT64};
  size_t i;
  for (i = 0; i < sizeof types / sizeof types[0]; ++i) {
    const char* want = npy_descr(types[i]);
    if (strcmp(d, want) == 0) return types[i];
    /* single-byte types may be written '<' or '=' as well */
    if (want[0] == '|' && (d[0] == '<' || d[0] == '=') && strcmp(d + 1, want + 1) == 0) return types[i];
  }
  return BH_TYPE_UNDEFINED;
}

static inline int npy_fail(char* err, size_t errlen, const char* path, const char* what) {
  snprintf(err, errlen, "%s: %s", path, what);
  return -1;
}

/* Reads `path` into *out. Returns 0, or -1 with a message in err. */
static inline int npy_read(const char* path, NpyArray* out, char* err, size_t errlen) {
  FILE* f = fopen(path, "rb");
  unsigned char pre[12];
  size_t header_len, n = 1, bytes;
  char* header;
  const char *p, *q;
  char descr[16];
  NpyArray a;
  memset(&a, 0, sizeof a);
  if (!f) return npy_fail(err, errlen, path, "cannot open the file");
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    fclose(f);
    return npy_fail(err, errlen, path, "not a .npy file");
  }
  if (pre[6] == 1) {
    header_len = (size_t)pre[8] | ((size_t)pre[9] << 8);
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) {
      fclose(f);
      return npy_fail(err, errlen, path, "truncated header");
    }
    header_len = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
  } else {
    fclose(f);
    return npy_fail(err, errlen, path, "unknown .npy format version");
  }
  if (header_len > 1 << 20 || !(header = (char*)malloc(header_len + 1))) {
    fclose(f);
    return npy_fail(err, errlen, path, "header too long");
  }
  if (fread(header, 1, header_len, f) != header_len) {
    free(header);
    fclose(f);
    return npy_fail(err, errlen, path, "truncated header");
  }
  header[header_len] = 0;
  p = strstr(header, "'descr':");
  if (!p || !(p = strchr(p + 8, '\'')) || !(q = strchr(p + 1, '\'')) || (size_t)(q - p - 1) >= sizeof descr) {
    free(header);
    fclose(f);
    return npy_fail(err, errlen, path, "no element type in the header");
  }
  memcpy(descr, p + 1, (size_t)(q - p - 1));
  descr[q - p - 1] = 0;
  a.type = npy_type_from_descr(descr);
  if (a.type == BH_TYPE_UNDEFINED || strstr(header, "'fortran_order': True")) {
    free(header);
    fclose(f);
    return npy_fail(err, errlen, path, "unsupported element type or Fortran order");
  }
  p = strstr(header, "'shape':");
  if (!p || !(p = strchr(p, '('))) {
    free(header);
    fclose(f);
    return npy_fail(err, errlen, path, "no shape in the header");
  }
  ++p;
  while (*p && *p != ')') {
    char* end;
    long long d;
    while (*p == ' ' || *p == ',') ++p;
    if (*p == ')') break;
    d = strtoll(p, &end, 10);
    if (end == p || d < 0 || a.rank == NPY_MAX_RANK || (d && n > SIZE_MAX / (size_t)d)) {
      free(header);
      fclose(f);
      return npy_fail(err, errlen, path, "bad shape in the header");
    }
    a.dims[a.rank++] = d;
    n *= (size_t)d;
    p = end;
  }
  free(header);
  if (n > SIZE_MAX / npy_type_size(a.type)) {
    fclose(f);
    return npy_fail(err, errlen, path, "too large");
  }
  bytes = n * npy_type_size(a.type);
  a.size = bytes;
  a.data = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (!a.data || fread(a.data, 1, bytes, f) != bytes) {
    free(a.data);
    fclose(f);
    return npy_fail(err, errlen, path, a.data ? "truncated data" : "out of memory");
  }
  fclose(f);
  *out = a;
  return 0;
}

/* Writes `rank` dims of `type` elements from `data` to `path` (format version 1.0). */
static inline int npy_write(const char* path, BhElementType type, const int64_t* dims, size_t rank, const void* data,
                     size_t size, char* err, size_t errlen) {
  char header[512];
  int len;
  size_t i, padded;
  FILE* f;
  const char* d = npy_descr(type);
  if (!d) return npy_fail(err, errlen, path, "no .npy element type for this tensor");
  len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", d);
  for (i = 0; i < rank; ++i)
    len += snprintf(header + len, sizeof header - (size_t)len, "%lld%s", (long long)dims[i], rank == 1 ? "," : (i + 1 < rank ? ", " : ""));
  len += snprintf(header + len, sizeof header - (size_t)len, "), }");
  padded = ((size_t)len + 10 + 1 + 63) / 64 * 64 - 10;
  while ((size_t)len < padded - 1) header[len++] = ' ';
  header[len++] = '\n';
  f = fopen(path, "wb");
  if (!f) return npy_fail(err, errlen, path, "cannot create the file");
  if (fwrite("\x93NUMPY\x01\x00", 1, 8, f) != 8 || fputc(len & 0xff, f) == EOF || fputc(len >> 8, f) == EOF ||
      fwrite(header, 1, (size_t)len, f) != (size_t)len || fwrite(data, 1, size, f) != size) {
    fclose(f);
    return npy_fail(err, errlen, path, "write failed");
  }
  if (fclose(f) != 0) return npy_fail(err, errlen, path, "write failed");
  return 0;
}

#endif /* BULKHEAD_EXAMPLES_NPY_H_ */
