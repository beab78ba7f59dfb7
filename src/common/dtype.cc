#include "bulkhead/dtype.h"

#include <cstring>

namespace bulkhead {

size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kInt32: case DataType::kUInt32: return 4;
    case DataType::kUInt8: case DataType::kInt8: case DataType::kBool: return 1;
    case DataType::kUInt16: case DataType::kInt16: case DataType::kFloat16: case DataType::kBFloat16: return 2;
    case DataType::kInt64: case DataType::kFloat64: case DataType::kUInt64: return 8;
    default: return 0;
  }
}

std::string dtype_name(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kString: return "string";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat64: return "float64";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kUndefined: return "undefined";
  }
  return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
}

DataType dtype_from_name(const std::string& n) {
  static const struct { const char* name; const char* npy; DataType t; } kTable[] = {
      {"float32", "<f4", DataType::kFloat32}, {"uint8", "|u1", DataType::kUInt8},
      {"int8", "|i1", DataType::kInt8},       {"uint16", "<u2", DataType::kUInt16},
      {"int16", "<i2", DataType::kInt16},     {"int32", "<i4", DataType::kInt32},
      {"int64", "<i8", DataType::kInt64},     {"bool", "|b1", DataType::kBool},
      {"float16", "<f2", DataType::kFloat16}, {"float64", "<f8", DataType::kFloat64},
      {"uint32", "<u4", DataType::kUInt32},   {"uint64", "<u8", DataType::kUInt64},
  };
  for (const auto& e : kTable)
    if (n == e.name || n == e.npy) return e.t;
  if (n == "bfloat16") return DataType::kBFloat16;
  if (n == "string") return DataType::kString;
  if (n == "float") return DataType::kFloat32;
  if (n == "double") return DataType::kFloat64;
  // NumPy accepts '=' and '|' byte-order marks for one-byte and native types.
  if (n.size() == 3 && (n[0] == '=' || n[0] == '|' || n[0] == '<')) {
    std::string alt = n;
    for (char c : {'<', '|'}) {
      alt[0] = c;
      for (const auto& e : kTable)
        if (alt == e.npy) return e.t;
    }
  }
  return DataType::kUndefined;
}

bool dtype_is_float(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

bool dtype_is_integer(DataType t) {
  switch (t) {
    case DataType::kUInt8: case DataType::kInt8: case DataType::kUInt16: case DataType::kInt16:
    case DataType::kInt32: case DataType::kInt64: case DataType::kUInt32: case DataType::kUInt64: return true;
    default: return false;
  }
}

bool dtype_is_known(int32_t v) {
  return (v >= 1 && v <= 13) || v == 16;
}

int64_t shape_numel(const Shape& s) {
  // A zero anywhere makes the count 0, however large the other dimensions (which a
  // tensor with no elements may have: their product need not fit).
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool checked_numel(const Shape& s, int64_t* numel) {
  bool empty = false;
  for (int64_t d : s) {
    if (d < 0) return false;
    empty |= d == 0;
  }
  int64_t n = 1;
  if (empty) n = 0;
  else
    for (int64_t d : s)
      if (__builtin_mul_overflow(n, d, &n)) return false;
  *numel = n;
  return true;
}

bool checked_nbytes(DataType t, const Shape& s, size_t* nbytes) {
  int64_t n = 0;
  size_t b = 0;
  if (!checked_numel(s, &n) || __builtin_mul_overflow(static_cast<size_t>(n), dtype_size(t), &b)) return false;
  *nbytes = b;
  return true;
}

std::string shape_to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {  // subnormal
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffffu;
  if (exp == 255) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float bfloat16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace bulkhead
