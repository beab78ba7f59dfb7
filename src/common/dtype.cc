#include "bulkhead/dtype.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace bulkhead {

size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kInt32: case DataType::kUInt32: return 4;
    case DataType::kUInt8: case DataType::kInt8: case DataType::kBool: return 1;
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kUInt4: case DataType::kInt4: case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0: case DataType::kUInt2: case DataType::kInt2: return 1;
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
    case DataType::kFloat8E4M3FN: return "float8e4m3fn";
    case DataType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DataType::kFloat8E5M2: return "float8e5m2";
    case DataType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DataType::kUInt4: return "uint4";
    case DataType::kInt4: return "int4";
    case DataType::kFloat4E2M1: return "float4e2m1";
    case DataType::kFloat8E8M0: return "float8e8m0";
    case DataType::kUInt2: return "uint2";
    case DataType::kInt2: return "int2";
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
  for (int v = 17; v <= 26; ++v)
    if (n == dtype_name(static_cast<DataType>(v))) return static_cast<DataType>(v);
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
  return (v >= 1 && v <= 13) || (v >= 16 && v <= 26);
}

bool dtype_is_small_float(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1: case DataType::kFloat8E8M0: return true;
    default: return false;
  }
}

bool dtype_is_subbyte_int(DataType t) {
  return t == DataType::kUInt4 || t == DataType::kInt4 || t == DataType::kUInt2 || t == DataType::kInt2;
}

int dtype_bits(DataType t) {
  switch (t) {
    case DataType::kUInt4: case DataType::kInt4: case DataType::kFloat4E2M1: return 4;
    case DataType::kUInt2: case DataType::kInt2: return 2;
    default: return static_cast<int>(8 * dtype_size(t));
  }
}

size_t dtype_packed_nbytes(DataType t, int64_t n) {
  const int bits = dtype_bits(t);
  if (bits >= 8) return static_cast<size_t>(n) * static_cast<size_t>(bits / 8);
  const int64_t per = 8 / bits;
  return static_cast<size_t>((n + per - 1) / per);
}

void dtype_pack(DataType t, const void* unpacked, int64_t n, void* packed) {
  const int bits = dtype_bits(t);
  if (bits >= 8) {
    if (n) std::memcpy(packed, unpacked, static_cast<size_t>(n) * dtype_size(t));
    return;
  }
  const auto* s = static_cast<const uint8_t*>(unpacked);
  auto* d = static_cast<uint8_t*>(packed);
  const int per = 8 / bits;
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  std::memset(d, 0, dtype_packed_nbytes(t, n));
  for (int64_t i = 0; i < n; ++i) d[i / per] = static_cast<uint8_t>(d[i / per] | ((s[i] & mask) << ((i % per) * bits)));
}

void dtype_unpack(DataType t, const void* packed, int64_t n, void* unpacked) {
  const int bits = dtype_bits(t);
  if (bits >= 8) {
    if (n) std::memcpy(unpacked, packed, static_cast<size_t>(n) * dtype_size(t));
    return;
  }
  const auto* s = static_cast<const uint8_t*>(packed);
  auto* d = static_cast<uint8_t*>(unpacked);
  const int per = 8 / bits;
  const bool sign = t == DataType::kInt4 || t == DataType::kInt2;
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t v = static_cast<uint8_t>((s[i / per] >> ((i % per) * bits)) & mask);
    if (sign) v = static_cast<uint8_t>(static_cast<int8_t>(static_cast<uint8_t>(v << (8 - bits))) >> (8 - bits));
    d[i] = v;
  }
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

namespace {

// An IEEE-style small float: sign, `ebits` exponent bits with `bias`, `mbits` mantissa bits.
struct SmallFloatFormat {
  int ebits, mbits, bias;
  bool infinities;  // the all-ones exponent with a zero mantissa is infinity (float8e5m2)
  bool uz;          // no negative zero: 0x80 is the one NaN (the FNUZ types)
  bool has_nan;
  double max;         // largest finite value
  uint8_t nan_code;   // NaN's encoding (sign added for the types with signed NaNs)
};

const SmallFloatFormat& format_of(DataType t) {
  static const SmallFloatFormat kE4M3FN{4, 3, 7, false, false, true, 448.0, 0x7f};
  static const SmallFloatFormat kE4M3FNUZ{4, 3, 8, false, true, true, 240.0, 0x80};
  static const SmallFloatFormat kE5M2{5, 2, 15, true, false, true, 57344.0, 0x7e};
  static const SmallFloatFormat kE5M2FNUZ{5, 2, 16, false, true, true, 57344.0, 0x80};
  static const SmallFloatFormat kE2M1{2, 1, 1, false, false, false, 6.0, 0x08};
  switch (t) {
    case DataType::kFloat8E4M3FN: return kE4M3FN;
    case DataType::kFloat8E4M3FNUZ: return kE4M3FNUZ;
    case DataType::kFloat8E5M2: return kE5M2;
    case DataType::kFloat8E5M2FNUZ: return kE5M2FNUZ;
    default: return kE2M1;
  }
}

float decode(const SmallFloatFormat& f, unsigned code) {
  const unsigned total = 1u + static_cast<unsigned>(f.ebits + f.mbits);
  const unsigned sign = (code >> (total - 1)) & 1u;
  const unsigned exp = (code >> f.mbits) & ((1u << f.ebits) - 1);
  const unsigned mant = code & ((1u << f.mbits) - 1);
  if (f.uz && code == 0x80) return std::nanf("");
  if (f.has_nan && !f.uz) {
    const unsigned all = (1u << f.ebits) - 1;
    if (f.infinities && exp == all) return mant ? std::nanf("") : (sign ? -INFINITY : INFINITY);
    if (!f.infinities && exp == all && mant == (1u << f.mbits) - 1) return sign ? -std::nanf("") : std::nanf("");
  }
  double v = exp == 0 ? std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mbits)
                      : std::ldexp(static_cast<double>(mant + (1u << f.mbits)), static_cast<int>(exp) - f.bias - f.mbits);
  return static_cast<float>(sign ? -v : v);
}

uint8_t encode(const SmallFloatFormat& f, double v, bool saturate) {
  const int total = 1 + f.ebits + f.mbits;
  const uint8_t sign = std::signbit(v) ? static_cast<uint8_t>(1u << (total - 1)) : 0;
  const bool sat = saturate || (!f.has_nan && !f.infinities);
  auto max_code = [&] {
    // The largest finite value's code: all-ones exponent and mantissa, less one step where
    // that pattern is NaN (float8e4m3fn) and less a whole exponent where it is infinity.
    double r = f.max;
    int e = 0;
    std::frexp(r, &e);
    int field = (e - 1) + f.bias;
    unsigned mant = static_cast<unsigned>(std::ldexp(r, -(e - 1) + f.mbits)) - (1u << f.mbits);
    return static_cast<uint8_t>((static_cast<unsigned>(field) << f.mbits) | mant);
  };
  auto overflow = [&]() -> uint8_t {
    if (sat) return static_cast<uint8_t>(sign | max_code());
    if (f.infinities) return static_cast<uint8_t>(sign | (((1u << f.ebits) - 1) << f.mbits));
    return f.uz ? f.nan_code : static_cast<uint8_t>(sign | f.nan_code);
  };
  if (std::isnan(v)) return f.uz || !f.has_nan ? f.nan_code : static_cast<uint8_t>(sign | f.nan_code);
  if (std::isinf(v)) return overflow();
  double a = std::fabs(v);
  if (a == 0) return f.uz ? 0 : sign;
  int e = 0;
  std::frexp(a, &e);
  const int emin = 1 - f.bias;
  int q = std::max(e - 1, emin) - f.mbits;  // the value of one unit in the last place
  double r = std::nearbyint(std::ldexp(a, -q));  // to nearest even
  if (r == 0) return f.uz ? 0 : sign;
  if (std::ldexp(r, q) > f.max) return overflow();
  if (r >= std::ldexp(1.0, f.mbits + 1)) { r /= 2; ++q; }
  const unsigned ri = static_cast<unsigned>(r);
  if (ri < (1u << f.mbits)) return static_cast<uint8_t>(sign | ri);  // subnormal
  const unsigned field = static_cast<unsigned>(q + f.mbits + f.bias);
  return static_cast<uint8_t>(sign | (field << f.mbits) | (ri - (1u << f.mbits)));
}

// 2^(code - 127) for the power of two at or below |v|, moved up by `round`; the sign is
// ignored. Values below 2^-127 take the smallest code, values past 2^127 saturate or are NaN.
uint8_t encode_e8m0(double v, bool saturate, E8M0Round round) {
  if (std::isnan(v)) return 0xff;
  const double a = std::fabs(v);
  if (std::isinf(a)) return saturate ? 0xfe : 0xff;
  if (a == 0) return 0;
  int e = 0;
  const double m = 2 * std::frexp(a, &e) - 1;  // a = (1 + m) * 2^(e - 1), m in [0, 1)
  int code = e - 1 + 127;
  if ((round == E8M0Round::kUp && m > 0) || (round == E8M0Round::kNearest && m >= 0.5)) ++code;  // ties go up
  if (code < 0) return 0;
  if (code > 254) return saturate ? 0xfe : 0xff;
  return static_cast<uint8_t>(code);
}

}  // namespace

float small_float_to_float(DataType t, uint8_t code) {
  if (t == DataType::kFloat8E8M0) return code == 0xff ? std::nanf("") : std::ldexp(1.0f, static_cast<int>(code) - 127);
  if (t == DataType::kFloat4E2M1) return decode(format_of(t), code & 0x0fu);
  return decode(format_of(t), code);
}

uint8_t float_to_small_float(DataType t, double v, bool saturate, E8M0Round e8m0_round) {
  if (t == DataType::kFloat8E8M0) return encode_e8m0(v, saturate, e8m0_round);
  return encode(format_of(t), v, saturate);
}

}  // namespace bulkhead
