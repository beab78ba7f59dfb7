// Element-type sets and compile-time dispatch shared by the element-wise kernel files.
#pragma once

#include <cstdint>
#include <string>

#include "bulkhead/dtype.h"
#include "bulkhead/status.h"

namespace bulkhead::cpu::ew {

template <class T> struct Tag { using type = T; };

// ---------------------------------------------------------------------------------------
// Type sets and dispatch.

enum TypeSet : unsigned {
  kF32 = 1u << 0, kF64 = 1u << 1,
  kI8 = 1u << 2, kI16 = 1u << 3, kI32 = 1u << 4, kI64 = 1u << 5,
  kU8 = 1u << 6, kU16 = 1u << 7, kU32 = 1u << 8, kU64 = 1u << 9,
  kBoolT = 1u << 10, kStr = 1u << 11,
  kFloats = kF32 | kF64,
  kSigned = kI8 | kI16 | kI32 | kI64,
  kUnsigned = kU8 | kU16 | kU32 | kU64,
  kInts = kSigned | kUnsigned,
  kNumeric = kFloats | kInts,
};

// Calls f(Tag<T>{}) for the C++ type of `dt` when `dt` is in the compile-time set `Set`.
// bool maps to uint8_t (values 0/1).
template <unsigned Set, class F>
Status dispatch(DataType dt, const std::string& where, F&& f) {
  switch (dt) {
    case DataType::kFloat32: if constexpr ((Set & kF32) != 0) return f(Tag<float>{}); break;
    case DataType::kFloat64: if constexpr ((Set & kF64) != 0) return f(Tag<double>{}); break;
    case DataType::kInt8: if constexpr ((Set & kI8) != 0) return f(Tag<int8_t>{}); break;
    case DataType::kInt16: if constexpr ((Set & kI16) != 0) return f(Tag<int16_t>{}); break;
    case DataType::kInt32: if constexpr ((Set & kI32) != 0) return f(Tag<int32_t>{}); break;
    case DataType::kInt64: if constexpr ((Set & kI64) != 0) return f(Tag<int64_t>{}); break;
    case DataType::kUInt8: if constexpr ((Set & kU8) != 0) return f(Tag<uint8_t>{}); break;
    case DataType::kUInt16: if constexpr ((Set & kU16) != 0) return f(Tag<uint16_t>{}); break;
    case DataType::kUInt32: if constexpr ((Set & kU32) != 0) return f(Tag<uint32_t>{}); break;
    case DataType::kUInt64: if constexpr ((Set & kU64) != 0) return f(Tag<uint64_t>{}); break;
    case DataType::kBool: if constexpr ((Set & kBoolT) != 0) return f(Tag<uint8_t>{}); break;
    case DataType::kString: if constexpr ((Set & kStr) != 0) return f(Tag<std::string>{}); break;
    default: break;
  }
  return unsupported(where + "unsupported element type " + dtype_name(dt));
}

}  // namespace bulkhead::cpu::ew
