// Load-time element-type checks for CPU kernel factories. A node whose input type is
// known when the session is built (declared in the model or inferred at import, see
// KernelInfo::input_types) and lies outside the set its kernel handles is rejected by the
// factory -- kUnsupported, naming the node, operator and type -- instead of failing on
// its first run. Unknown types (kUndefined) pass; the kernel still checks at run time.
//
// Stateless helpers; any thread.
#pragma once

#include <string>

#include "backend/kernel.h"
#include "backends/cpu/kernels/elementwise_dispatch.h"

namespace bulkhead::cpu {

// Element types a kernel handles: an ew::TypeSet mask, plus float16 and bfloat16 when
// `half` (computed in float32).
struct TypeSupport {
  unsigned set = 0;
  bool half = false;
};

inline bool supports(TypeSupport s, DataType t) {
  using namespace ew;
  switch (t) {
    case DataType::kFloat32: return s.set & kF32;
    case DataType::kFloat64: return s.set & kF64;
    case DataType::kFloat16: case DataType::kBFloat16: return s.half;
    case DataType::kInt8: return s.set & kI8;
    case DataType::kInt16: return s.set & kI16;
    case DataType::kInt32: return s.set & kI32;
    case DataType::kInt64: return s.set & kI64;
    case DataType::kUInt8: return s.set & kU8;
    case DataType::kUInt16: return s.set & kU16;
    case DataType::kUInt32: return s.set & kU32;
    case DataType::kUInt64: return s.set & kU64;
    case DataType::kBool: return s.set & kBoolT;
    case DataType::kString: return s.set & kStr;
    default: return false;
  }
}

// "float32, float64, float16, bfloat16"
inline std::string describe(TypeSupport s) {
  static constexpr DataType kOrder[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                                        DataType::kInt8,    DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                                        DataType::kUInt8,   DataType::kUInt16,  DataType::kUInt32,  DataType::kUInt64,
                                        DataType::kBool,    DataType::kString};
  std::string r;
  for (DataType t : kOrder)
    if (supports(s, t)) r += (r.empty() ? "" : ", ") + dtype_name(t);
  return r;
}

// Input `i` of the node, when present and of known type, must be in `s`.
inline Status check_input_type(const KernelInfo& info, size_t i, TypeSupport s) {
  if (i >= info.input_types.size() || i >= info.node.inputs.size()) return Status::ok();
  const DataType t = info.input_types[i];
  if (t == DataType::kUndefined || supports(s, t)) return Status::ok();
  return unsupported(info.where() + "input type " + dtype_name(t) + " is not supported (input '" + info.node.inputs[i] +
                     "'; the CPU kernel takes " + describe(s) + ")");
}

// The same check for several inputs.
inline Status check_input_types(const KernelInfo& info, std::initializer_list<size_t> inputs, TypeSupport s) {
  for (size_t i : inputs) BH_RETURN_IF_ERROR(check_input_type(info, i, s));
  return Status::ok();
}

}  // namespace bulkhead::cpu
