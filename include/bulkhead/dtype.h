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
  // 8-bit floats (ONNX 1.14+), the 4-bit float of the OCP MX formats and the sub-byte
  // integers. In memory every one of them takes one byte per element: the float8 types
  // their encoding; uint4/uint2 the value (0..15, 0..3); int4/int2 the value sign-extended
  // to a whole int8 (-8..7, -2..1); float4e2m1 its 4-bit code in the low bits. Sub-byte
  // types are packed (element 0 in the lowest bits) only where ONNX serialises them:
  // TensorProto raw data, int32_data (one packed byte per entry) and external data.
  kFloat8E4M3FN = 17,    // no infinities, NaN 0x7f/0xff, max 448
  kFloat8E4M3FNUZ = 18,  // no infinities, no negative zero, NaN 0x80, max 240
  kFloat8E5M2 = 19,      // IEEE-like: infinities, NaNs, max 57344
  kFloat8E5M2FNUZ = 20,  // no infinities, no negative zero, NaN 0x80, max 57344
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,  // no infinities or NaN, max 6
  kFloat8E8M0 = 24,  // exponent only: 2^(code-127), no sign, no zero, NaN 0xff
  kUInt2 = 25,
  kInt2 = 26,
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
// The float8 types and float4e2m1: held as codes, computed through float32.
bool dtype_is_small_float(DataType t);
// int4, uint4, int2, uint2.
bool dtype_is_subbyte_int(DataType t);
// Bits per element where ONNX serialises the type (4 or 2 for the sub-byte types, else
// 8 * dtype_size); 0 for kUndefined and kString.
int dtype_bits(DataType t);
// Bytes that n elements take serialised (packed for the sub-byte types).
size_t dtype_packed_nbytes(DataType t, int64_t n);
// Packs n one-byte-per-element values into dtype_packed_nbytes(t, n) bytes, and back
// (unpacking sign-extends int4/int2). For other types both are plain copies of n bytes
// times dtype_size.
void dtype_pack(DataType t, const void* unpacked, int64_t n, void* packed);
void dtype_unpack(DataType t, const void* packed, int64_t n, void* unpacked);

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

// Small float codes (dtype_is_small_float) <-> values. Decoding is exact. Encoding rounds to
// nearest even; `saturate` (ONNX Cast's attribute, default on) clamps values beyond the
// largest finite one, infinities included, to it, and otherwise makes them infinity
// (float8e5m2) or NaN. float4e2m1 always saturates (it has neither). float8e8m0 ignores
// the sign and takes the power of two at or below the value, moved up one by `e8m0_round`:
// kUp for any remainder, kNearest from half way (ties up), kDown never.
enum class E8M0Round { kUp, kDown, kNearest };
float small_float_to_float(DataType t, uint8_t code);
uint8_t float_to_small_float(DataType t, double v, bool saturate = true, E8M0Round e8m0_round = E8M0Round::kUp);

}  // namespace bulkhead
