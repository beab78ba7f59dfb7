// Helpers shared by the reduction and misc kernel families: float16 conversion, a
// vectorisable exp for softmax-like loops, lane-split row reductions, and a generic
// permute. Header-only, no state.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu::redutil {

inline bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// A float32 host copy of a float16/bfloat16/float32/float64 tensor.
inline Tensor to_float32(const Tensor& t) {
  Tensor out = Tensor::host(DataType::kFloat32, t.shape());
  float* o = out.data<float>();
  int64_t n = t.numel();
  switch (t.dtype()) {
    case DataType::kFloat16: {
      const uint16_t* s = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = half_to_float(s[i]);
      break;
    }
    case DataType::kBFloat16: {
      const uint16_t* s = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = bfloat16_to_float(s[i]);
      break;
    }
    case DataType::kFloat64: {
      const double* s = t.data<double>();
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
      break;
    }
    case DataType::kFloat32:
      if (n) std::memcpy(o, t.raw(), static_cast<size_t>(n) * 4);
      break;
    default:
      break;
  }
  return out;
}

// Writes float32 values into a float16/bfloat16/float32/float64 tensor of equal size.
inline void from_float32(const float* src, const Tensor& dst) {
  int64_t n = dst.numel();
  switch (dst.dtype()) {
    case DataType::kFloat16: {
      uint16_t* d = dst.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
      break;
    }
    case DataType::kBFloat16: {
      uint16_t* d = dst.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bfloat16(src[i]);
      break;
    }
    case DataType::kFloat64: {
      double* d = dst.data<double>();
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      break;
    }
    case DataType::kFloat32:
      if (n) std::memcpy(dst.raw(), src, static_cast<size_t>(n) * 4);
      break;
    default:
      break;
  }
}

// exp(x) for float, branch-free so loops over it vectorise (Cephes-style polynomial,
// ~1 ulp). Exact 0 below the float range, +inf above it, NaN propagates.
inline float exp_ps(float x) {
  const float lo = -87.33654f, hi = 88.0f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float t = xc * 1.44269504088896341f + magic;
  float fx = t - magic;
  float r = xc - fx * 0.693359375f + fx * 2.12194440e-4f;
  float r2 = r * r;
  float y = 1.9875691500E-4f;
  y = y * r + 1.3981999507E-3f;
  y = y * r + 8.3334519073E-3f;
  y = y * r + 4.1665795894E-2f;
  y = y * r + 1.6666665459E-1f;
  y = y * r + 5.0000001201E-1f;
  y = y * r2 + r + 1.0f;
  uint32_t n = std::bit_cast<uint32_t>(t) - 0x4B400000u;
  float p = std::bit_cast<float>((n + 127u) << 23);
  float res = y * p;
  res = x < lo ? 0.0f : res;
  res = x > 88.72283f ? std::numeric_limits<float>::infinity() : res;
  return x != x ? x : res;
}
inline double exp_ps(double x) { return std::exp(x); }

// Max over n values with 8 independent lanes (vectorises without fast-math).
template <typename T>
inline T row_max(const T* x, int64_t n) {
  T acc[8];
  for (auto& a : acc) a = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  T m = -std::numeric_limits<T>::infinity();
  for (int l = 0; l < 8; ++l) m = acc[l] > m ? acc[l] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

template <typename T>
inline T row_sum(const T* x, int64_t n) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[i + l];
  T s = 0;
  for (; i < n; ++i) s += x[i];
  for (int l = 0; l < 8; ++l) s += acc[l];
  return s;
}

template <size_t E>
inline void copy_strided(char* d, const char* s, int64_t off, int64_t stride, int64_t n) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(d + j * E, s + (off + j * stride) * E, E);
}

// Copies `src` (row-major, `shape`) to `dst` with dims reordered by `perm`
// (dst dim i = src dim perm[i]). Works on any element size.
inline void permute_bytes(const void* src, const Shape& shape, const std::vector<int>& perm, size_t esize, void* dst) {
  int r = static_cast<int>(shape.size());
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  if (r == 0) {
    std::memcpy(dst, src, esize);
    return;
  }
  auto st = strides_of(shape);
  Shape os(r);
  std::vector<int64_t> ist(r);
  for (int i = 0; i < r; ++i) {
    os[i] = shape[perm[i]];
    ist[i] = st[perm[i]];
  }
  int64_t inner = os[r - 1], istride = ist[r - 1];
  int64_t rows = n / inner;
  std::vector<int64_t> idx(r, 0);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (int i = 0; i < r - 1; ++i) off += idx[i] * ist[i];
    char* drow = d + static_cast<size_t>(row * inner) * esize;
    switch (esize) {
      case 1: copy_strided<1>(drow, s, off, istride, inner); break;
      case 2: copy_strided<2>(drow, s, off, istride, inner); break;
      case 4: copy_strided<4>(drow, s, off, istride, inner); break;
      case 8: copy_strided<8>(drow, s, off, istride, inner); break;
      default:
        for (int64_t j = 0; j < inner; ++j)
          std::memcpy(drow + j * esize, s + static_cast<size_t>(off + j * istride) * esize, esize);
    }
    for (int i = r - 2; i >= 0; --i) {
      if (++idx[i] < os[i]) break;
      idx[i] = 0;
    }
  }
}

}  // namespace bulkhead::cpu::redutil
