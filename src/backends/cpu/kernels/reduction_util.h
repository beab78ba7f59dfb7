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

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BH_RED_AVX2 1
#endif

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

#ifdef BH_RED_AVX2
// Eight lanes of exp_ps. (Written with intrinsics: GCC will not if-convert the clamps of
// the scalar version under the default -ftrapping-math, so that loop stays scalar.)
inline __m256 exp8_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.0f);
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
  __m256 fx = _mm256_sub_ps(t, magic);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fmadd_ps(fx, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, r2, r), _mm256_set1_ps(1.0f));
  __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000));
  __m256 p = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  __m256 res = _mm256_mul_ps(y, p);
  res = _mm256_and_ps(res, _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
  res = _mm256_blendv_ps(res, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                         _mm256_cmp_ps(x, _mm256_set1_ps(88.72283f), _CMP_GT_OQ));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

// y[i] = exp(x[i] - m); returns the sum of y.
inline float exp_sub_sum(const float* x, float m, float* y, int64_t n) {
  int64_t i = 0;
  float s = 0;
#ifdef BH_RED_AVX2
  __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp8_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float l : lanes) s += l;
#endif
  for (; i < n; ++i) {
    y[i] = exp_ps(x[i] - m);
    s += y[i];
  }
  return s;
}
inline double exp_sub_sum(const double* x, double m, double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - m);
    s += y[i];
  }
  return s;
}

// y[i] = exp(x[i] - m[i]); s[i] += y[i].
inline void exp_sub_lanes(const float* x, const float* m, float* y, float* s, int64_t n) {
  int64_t i = 0;
#ifdef BH_RED_AVX2
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp8_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i)));
    _mm256_storeu_ps(y + i, e);
    _mm256_storeu_ps(s + i, _mm256_add_ps(_mm256_loadu_ps(s + i), e));
  }
#endif
  for (; i < n; ++i) {
    y[i] = exp_ps(x[i] - m[i]);
    s[i] += y[i];
  }
}
inline void exp_sub_lanes(const double* x, const double* m, double* y, double* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - m[i]);
    s[i] += y[i];
  }
}

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
