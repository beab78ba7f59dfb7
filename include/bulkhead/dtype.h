// Element types (values follow ONNX TensorProto.DataType) and shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bulkhead {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

// Size in bytes of one element; 0 for kUndefined and kString (strings are held apart).
size_t dtype_size(DataType t);
// "float32", "int64", ...; "dtype(N)" for values bulkhead does not know.
std::string dtype_name(DataType t);
// Parses a name as printed by dtype_name, or a NumPy descriptor ("<f4"). kUndefined if unknown.
DataType dtype_from_name(const std::string& name);
bool dtype_is_float(DataType t);    // float16/32/64, bfloat16
bool dtype_is_integer(DataType t);  // signed and unsigned integers (not bool)
bool dtype_is_known(int32_t onnx_type);

using Shape = std::vector<int64_t>;

// The element count of a shape already known to be valid (a tensor's own shape).
int64_t shape_numel(const Shape& s);
// Checked sizes, for every place where a shape that came from outside (a file, a message,
// an option) or was computed from one becomes an element or byte count: false when a
// dimension is negative or the count overflows (int64 elements, size_t bytes); the
// out-parameter is then untouched.
bool checked_numel(const Shape& s, int64_t* numel);
bool checked_nbytes(DataType t, const Shape& s, size_t* nbytes);
// "[1,3,224,224]"
std::string shape_to_string(const Shape& s);

// Binary float16 / bfloat16 conversion helpers.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace bulkhead
