// Element readers for the quantisation kernels (quantize.cc) and the integer convolutions
// (dnnl.cc): values, scales and zero points of any of their types.
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

}  // namespace bulkhead::cpu
