// Element readers for the quantisation kernels (quantize.cc) and the integer convolutions
// (dnnl.cc): values, scales and zero points of any of their types; and the per-tensor
// 8-bit QuantizeLinear / DequantizeLinear loops (quantize.cc, quant_eltwise.cc).
#pragma once

#include <cstdint>

#include "bulkhead/dtype.h"
#include "bulkhead/tensor.h"

namespace bulkhead::cpu {

// Element i of a tensor of any quantised or scale type, as float (exact for every type here
// but int32 beyond 2^24, which DequantizeLinear reads through int_at instead).
inline float float_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat32: return t.data<float>()[i];
    case DataType::kFloat16: return half_to_float(t.data<uint16_t>()[i]);
    case DataType::kBFloat16: return bfloat16_to_float(t.data<uint16_t>()[i]);
    case DataType::kInt32: return static_cast<float>(t.data<int32_t>()[i]);
    default:
      if (dtype_is_small_float(t.dtype())) return small_float_to_float(t.dtype(), t.data<uint8_t>()[i]);
      return 0.0f;
  }
}

inline int32_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUInt8: case DataType::kUInt4: case DataType::kUInt2: return t.data<uint8_t>()[i];
    case DataType::kInt8: case DataType::kInt4: case DataType::kInt2: return t.data<int8_t>()[i];
    case DataType::kUInt16: return t.data<uint16_t>()[i];
    case DataType::kInt16: return t.data<int16_t>()[i];
    case DataType::kInt32: return t.data<int32_t>()[i];
    default: return 0;
  }
}

// The per-tensor 8-bit fast paths, out of line with restrict pointers: through a lambda's
// captures GCC had to assume each 8-bit store could change the scale and bounds it read
// (char-typed stores alias anything) and kept the loop scalar — 3.3 ms to quantise det's
// 2.5 M-value activation, about ten times its memory traffic.
// QuantizeLinear: x / scale clamped to the range less the zero point (the bounds are
// whole numbers, so clamping and rounding commute), rounded half to even by adding and
// subtracting 1.5 * 2^23 (exact for such small values in the default rounding mode), the
// zero point added; NaN survives both and becomes the zero point.
//
// The quotient without a division per element (vdivps cost more than the rest of the loop
// together: ResNet-50's int8 residual Adds spent half their time in it). With inv =
// RN(1/scale), q = RN(x * inv) is within an ulp of x / scale, the residual x - q * scale is
// exact in one fused multiply-add, and RN(q + residual * inv) is the correctly rounded
// quotient (Markstein's theorem; it needs no overflow or underflow on the way, hence the
// bounds on the scale, and |q| < 2^30, beyond which the clamp decides and q suffices —
// also for ±inf and NaN). The result is RN(x / scale) itself, bit for bit; checked over
// every float x for a range of scales (quantize_test).
// Whether quantize_rows' quotient without a division holds for this scale (see above).
inline bool quotient_by_reciprocal(float sc) {
  const float asc = sc < 0 ? -sc : sc;
  return asc >= 0x1p-100f && asc <= 0x1p100f;
}

// A scaled value `r` as a quantised int32: clamped to [rlo, rhi] (the target's range less
// the zero point: whole numbers, so clamping and rounding commute), rounded half to even by
// adding and subtracting 1.5 * 2^23, the zero point `z` added; NaN becomes the zero point.
__attribute__((always_inline)) inline int32_t round_to_quantized(float r, float z, float rlo, float rhi) {
  const float magic = 12582912.0f;
  r = r < rlo ? rlo : r;
  r = r > rhi ? rhi : r;
  r = (r + magic) - magic;
  r = r == r ? r + z : z;
  return static_cast<int32_t>(r);
}

// One value of QuantizeLinear, as an int32 of the target's range; `inv` = 1 / sc, and
// quotient_by_reciprocal(sc) holds.
__attribute__((always_inline)) inline int32_t quantize_one(float v, float sc, float inv, float z, float rlo, float rhi) {
  const float q = v * inv;
  const float corrected = __builtin_fmaf(__builtin_fmaf(-q, sc, v), inv, q);
  return round_to_quantized((q < 0x1p30f && q > -0x1p30f) ? corrected : q, z, rlo, rhi);
}

template <typename T>
__attribute__((noinline)) inline void quantize_rows(const float* __restrict x, T* __restrict y, int64_t n, float sc, float z,
                                             float rlo, float rhi) {
  if (!quotient_by_reciprocal(sc)) {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(round_to_quantized(x[i] / sc, z, rlo, rhi));
    return;
  }
  const float inv = 1.0f / sc;
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(quantize_one(x[i], sc, inv, z, rlo, rhi));
}

// DequantizeLinear: (x - zero point) * scale.
template <typename T>
__attribute__((noinline)) inline void dequantize_rows(const T* __restrict x, float* __restrict y, int64_t n, int32_t z, float sc) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(int32_t{x[i]} - z) * sc;
}

}  // namespace bulkhead::cpu
