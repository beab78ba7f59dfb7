// Cast and CastLike, plus the element conversion routine the other elementwise kernels
// use to compute float16/bfloat16 in float32.
//
// Conversions follow NumPy's astype on x86: float -> integer truncates toward zero (values
// out of range and NaN become the x86 "integer indefinite", then wrap), integer ->
// integer wraps, anything -> bool is "!= 0", float16 rounds to nearest even directly from
// the source (no double rounding through float32).
#include <immintrin.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/cast.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu::ew {

void register_cast_kernels(KernelTable& t);

namespace {

struct F16 { uint16_t bits; };
struct BF16 { uint16_t bits; };
struct B8 { uint8_t v; };

template <class T> struct Tag { using type = T; };

// float64 -> float16, round to nearest even, in one step.
inline uint16_t double_to_half(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000u);
  int exp = static_cast<int>((b >> 52) & 0x7ff);
  uint64_t mant = b & ((uint64_t{1} << 52) - 1);
  if (exp == 0x7ff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  if (exp == 0) return sign;  // float64 subnormals are far below float16's range
  uint64_t m = mant | (uint64_t{1} << 52);
  auto rne_shift = [](uint64_t v, int s) -> uint64_t {
    if (s >= 64) return 0;
    uint64_t q = v >> s, rem = v & ((uint64_t{1} << s) - 1), half = uint64_t{1} << (s - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return q;
  };
  int e = exp - 1023 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e >= 1) {
    uint64_t q = rne_shift(m, 42);  // 11 significant bits
    if (q == 2048) { q = 1024; ++e; }
    if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | (e << 10) | (q - 1024));
  }
  // Subnormal result: value in units of 2^-24.
  uint64_t q = rne_shift(m, 42 + (1 - e));
  return static_cast<uint16_t>(sign | q);
}

template <class S>
inline auto widen(S s) {
  if constexpr (std::is_same_v<S, F16>) return half_to_float(s.bits);
  else if constexpr (std::is_same_v<S, BF16>) return bfloat16_to_float(s.bits);
  else if constexpr (std::is_same_v<S, B8>) return static_cast<uint8_t>(s.v != 0);
  else return s;
}

template <class I, class F>
inline I float_to_int(F f) {
  if constexpr (std::is_same_v<I, uint64_t>) {
    if (f >= F(9223372036854775808.0) && f < F(18446744073709551616.0)) return static_cast<uint64_t>(f);
  }
  // Signed types up to 32 bits and unsigned up to 16 bits convert through int32 (as x86
  // compilers do), the others through int64; out-of-range values and NaN take the
  // "integer indefinite" value of that intermediate before wrapping.
  if constexpr ((std::is_signed_v<I> && sizeof(I) <= 4) || (!std::is_signed_v<I> && sizeof(I) <= 2)) {
    int32_t v = std::numeric_limits<int32_t>::min();
    if (f >= F(-2147483648.0) && f < F(2147483648.0)) v = static_cast<int32_t>(f);
    return static_cast<I>(v);
  }
  int64_t v = std::numeric_limits<int64_t>::min();
  if (f >= F(-9223372036854775808.0) && f < F(9223372036854775808.0)) v = static_cast<int64_t>(f);
  return static_cast<I>(v);
}

template <class D, class S>
inline D cvt(S s) {
  auto w = widen(s);
  using W = decltype(w);
  if constexpr (std::is_same_v<D, B8>) {
    return B8{static_cast<uint8_t>(w != W(0))};
  } else if constexpr (std::is_same_v<D, F16>) {
    if constexpr (std::is_same_v<W, float>) return F16{float_to_half(w)};
    else return F16{double_to_half(static_cast<double>(w))};
  } else if constexpr (std::is_same_v<D, BF16>) {
    if constexpr (std::is_same_v<W, double>) {
      // float64 -> float32 rounding to odd, then float32 -> bfloat16 to nearest even: the
      // same result as one direct rounding.
      float f = static_cast<float>(w);
      if (static_cast<double>(f) != w && !std::isnan(w)) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        if (std::fabs(static_cast<double>(f)) > std::fabs(w)) --bits;
        bits |= 1u;
        std::memcpy(&f, &bits, 4);
      }
      return BF16{float_to_bfloat16(f)};
    } else {
      return BF16{float_to_bfloat16(static_cast<float>(w))};
    }
  } else if constexpr (std::is_floating_point_v<W> && std::is_integral_v<D>) {
    return float_to_int<D>(w);
  } else {
    return static_cast<D>(w);
  }
}

template <class S>
std::string to_str(S s) {
  auto w = widen(s);
  using W = decltype(w);
  if constexpr (std::is_same_v<S, B8>) {
    return w ? "1" : "0";
  } else if constexpr (std::is_floating_point_v<W>) {
    if (std::isnan(w)) return "NaN";
    if (std::isinf(w)) return w > 0 ? "INF" : "-INF";
    char buf[64];
    std::to_chars_result r;
    if constexpr (std::is_same_v<S, F16> || std::is_same_v<S, BF16>) r = std::to_chars(buf, buf + sizeof buf, w);
    else r = std::to_chars(buf, buf + sizeof buf, s);
    return std::string(buf, r.ptr);
  } else {
    return std::to_string(w);
  }
}

inline bool only_space(const char* p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
  return *p == '\0';
}

// Parses a numeric literal ("3.14", "1E8", "+INF", "nan", "100"); integers also accept a
// floating-point literal and truncate it ("100.5" -> 100).
template <class D>
bool from_str(const std::string& str, D& out) {
  const char* p = str.c_str();
  char* end = nullptr;
  if constexpr (std::is_same_v<D, B8>) {
    if (str == "true" || str == "True" || str == "TRUE") { out = B8{1}; return true; }
    if (str == "false" || str == "False" || str == "FALSE") { out = B8{0}; return true; }
  } else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
    long long v = std::strtoll(p, &end, 10);
    if (end != p && only_space(end)) { out = static_cast<D>(v); return true; }
  } else if constexpr (std::is_integral_v<D>) {
    unsigned long long v = std::strtoull(p, &end, 10);
    if (end != p && only_space(end) && str.find('-') == std::string::npos) { out = static_cast<D>(v); return true; }
  }
  double v = std::strtod(p, &end);  // accepts "inf", "+INF", "-INF", "NaN", any case
  if (end == p || !only_space(end)) return false;
  out = cvt<D>(v);
  return true;
}

template <class F>
Status dispatch_any(DataType dt, const std::string& where, F&& f) {
  switch (dt) {
    case DataType::kFloat32: return f(Tag<float>{});
    case DataType::kFloat64: return f(Tag<double>{});
    case DataType::kFloat16: return f(Tag<F16>{});
    case DataType::kBFloat16: return f(Tag<BF16>{});
    case DataType::kInt8: return f(Tag<int8_t>{});
    case DataType::kInt16: return f(Tag<int16_t>{});
    case DataType::kInt32: return f(Tag<int32_t>{});
    case DataType::kInt64: return f(Tag<int64_t>{});
    case DataType::kUInt8: return f(Tag<uint8_t>{});
    case DataType::kUInt16: return f(Tag<uint16_t>{});
    case DataType::kUInt32: return f(Tag<uint32_t>{});
    case DataType::kUInt64: return f(Tag<uint64_t>{});
    case DataType::kBool: return f(Tag<B8>{});
    case DataType::kString: return f(Tag<std::string>{});
    default: return unsupported(where + "unsupported element type " + dtype_name(dt));
  }
}

constexpr int64_t kGrain = 1 << 15;

void f32_to_f16(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(s + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; ++i) d[i] = float_to_half(s[i]);
}

void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(v));
  }
#endif
  for (; i < n; ++i) d[i] = half_to_float(s[i]);
}

template <class S, class D>
Status convert_typed(const Tensor& src, const Tensor& dst, int threads, const std::string& where) {
  const int64_t n = src.numel();
  if constexpr (std::is_same_v<S, std::string> && std::is_same_v<D, std::string>) {
    const std::string* s = src.strings();
    std::string* d = dst.strings();
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return Status::ok();
  } else if constexpr (std::is_same_v<S, std::string>) {
    const std::string* s = src.strings();
    D* d = dst.data<D>();
    for (int64_t i = 0; i < n; ++i)
      if (!from_str<D>(s[i], d[i]))
        return invalid_argument(where + "cannot convert string '" + s[i] + "' to " + dtype_name(dst.dtype()));
    return Status::ok();
  } else if constexpr (std::is_same_v<D, std::string>) {
    const S* s = src.data<S>();
    std::string* d = dst.strings();
    for (int64_t i = 0; i < n; ++i) d[i] = to_str(s[i]);
    return Status::ok();
  } else {
    const S* s = src.data<S>();
    D* d = dst.data<D>();
    if constexpr (std::is_same_v<S, float> && std::is_same_v<D, F16>) {
      parallel_for(threads, n, kGrain, [&](int64_t b, int64_t e) { f32_to_f16(s + b, &d[b].bits, e - b); });
    } else if constexpr (std::is_same_v<S, F16> && std::is_same_v<D, float>) {
      parallel_for(threads, n, kGrain, [&](int64_t b, int64_t e) { f16_to_f32(&s[b].bits, d + b, e - b); });
    } else if constexpr (std::is_same_v<S, D>) {
      std::memcpy(static_cast<void*>(d), static_cast<const void*>(s), static_cast<size_t>(n) * sizeof(S));
    } else {
      parallel_for(threads, n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = cvt<D>(s[i]);
      });
    }
    return Status::ok();
  }
}

// ONNX Cast-1 named the target type with a string.
DataType dtype_from_onnx_name(const std::string& s) {
  static const struct { const char* n; DataType t; } kNames[] = {
      {"FLOAT", DataType::kFloat32}, {"UINT8", DataType::kUInt8},   {"INT8", DataType::kInt8},
      {"UINT16", DataType::kUInt16}, {"INT16", DataType::kInt16},   {"INT32", DataType::kInt32},
      {"INT64", DataType::kInt64},   {"STRING", DataType::kString}, {"BOOL", DataType::kBool},
      {"FLOAT16", DataType::kFloat16}, {"DOUBLE", DataType::kFloat64}, {"UINT32", DataType::kUInt32},
      {"UINT64", DataType::kUInt64}, {"BFLOAT16", DataType::kBFloat16},
      {"FLOAT8E4M3FN", DataType::kFloat8E4M3FN}, {"FLOAT8E4M3FNUZ", DataType::kFloat8E4M3FNUZ},
      {"FLOAT8E5M2", DataType::kFloat8E5M2}, {"FLOAT8E5M2FNUZ", DataType::kFloat8E5M2FNUZ},
      {"UINT4", DataType::kUInt4}, {"INT4", DataType::kInt4}, {"FLOAT4E2M1", DataType::kFloat4E2M1},
      {"FLOAT8E8M0", DataType::kFloat8E8M0}, {"UINT2", DataType::kUInt2}, {"INT2", DataType::kInt2},
  };
  for (const auto& e : kNames)
    if (s == e.n) return e.t;
  return DataType::kUndefined;
}

bool castable(DataType t) { return t == DataType::kString || (dtype_is_known(static_cast<int32_t>(t)) && dtype_size(t) > 0); }

Status cast_compute(KernelContext& ctx, const Tensor& x, DataType to, const CastOptions& options) {
  if (x.dtype() == to) return ctx.set_output(0, Value(x));
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, to, x.shape()));
  if (x.numel() == 0) return Status::ok();
  return convert_into(x, out, ctx.threads(), ctx.where(), options);
}

// The same bytes seen as another one-byte type.
Tensor view_as(const Tensor& t, DataType dt) { return Tensor(dt, t.shape(), t.buffer(), t.offset()); }

// A value of a standard type as the double nearest it, except that 64-bit integers beyond
// 2^53 are rounded to odd: the one rounding to a small float that follows then gives the
// correctly rounded result (a plain round to nearest here could round twice).
template <class S>
inline double exact_double(const S& s) {
  if constexpr (std::is_same_v<S, int64_t> || std::is_same_v<S, uint64_t>) {
    const bool neg = std::is_signed_v<S> && s < 0;
    uint64_t u = neg ? uint64_t{0} - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
    const int width = 64 - __builtin_clzll(u | 1);
    if (width > 53) {
      const int shift = width - 53;
      uint64_t q = u >> shift;
      if (u & ((uint64_t{1} << shift) - 1)) q |= 1;
      double d = std::ldexp(static_cast<double>(q), shift);
      return neg ? -d : d;
    }
    return neg ? -static_cast<double>(u) : static_cast<double>(u);
  } else {
    return static_cast<double>(widen(s));
  }
}

// Conversions with a small float or a sub-byte integer on either side.
Status convert_narrow(const Tensor& src, const Tensor& dst, int threads, const std::string& where, const CastOptions& o) {
  const DataType st = src.dtype(), dt = dst.dtype();
  const int64_t n = src.numel();
  auto signed_byte = [](DataType t) { return t == DataType::kInt4 || t == DataType::kInt2; };
  // Sub-byte integers are held as whole int8/uint8 values.
  if (dtype_is_subbyte_int(st))
    return convert_into(view_as(src, signed_byte(st) ? DataType::kInt8 : DataType::kUInt8), dst, threads, where, o);
  if (dtype_is_subbyte_int(dt)) {
    Tensor bytes = view_as(dst, signed_byte(dt) ? DataType::kInt8 : DataType::kUInt8);
    BH_RETURN_IF_ERROR(convert_into(src, bytes, threads, where, o));
    const int bits = dtype_bits(dt);
    uint8_t* d = dst.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      uint8_t v = static_cast<uint8_t>(d[i] << (8 - bits));
      d[i] = signed_byte(dt) ? static_cast<uint8_t>(static_cast<int8_t>(v) >> (8 - bits)) : static_cast<uint8_t>(v >> (8 - bits));
    }
    return Status::ok();
  }
  if (dtype_is_small_float(st)) {
    const uint8_t* s = src.data<uint8_t>();
    float table[256];
    for (int c = 0; c < 256; ++c) table[c] = small_float_to_float(st, static_cast<uint8_t>(c));
    if (dtype_is_small_float(dt)) {
      uint8_t* d = dst.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_small_float(dt, table[s[i]], o.saturate, o.e8m0_round);
      return Status::ok();
    }
    return dispatch_any(dt, where, [&](auto tag) -> Status {
      using D = typename decltype(tag)::type;
      if constexpr (std::is_same_v<D, std::string>) {
        std::string* d = dst.strings();
        for (int64_t i = 0; i < n; ++i) d[i] = to_str(table[s[i]]);
      } else {
        D* d = dst.data<D>();
        parallel_for(threads, n, kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) d[i] = cvt<D>(table[s[i]]);
        });
      }
      return Status::ok();
    });
  }
  // A standard type to a small float.
  uint8_t* d = dst.data<uint8_t>();
  return dispatch_any(st, where, [&](auto tag) -> Status {
    using S = typename decltype(tag)::type;
    if constexpr (std::is_same_v<S, std::string>) {
      const std::string* s = src.strings();
      for (int64_t i = 0; i < n; ++i) {
        double v = 0;
        if (!from_str<double>(s[i], v))
          return invalid_argument(where + "cannot convert string '" + s[i] + "' to " + dtype_name(dt));
        d[i] = float_to_small_float(dt, v, o.saturate, o.e8m0_round);
      }
    } else {
      const S* s = src.data<S>();
      parallel_for(threads, n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = float_to_small_float(dt, exact_double(s[i]), o.saturate, o.e8m0_round);
      });
    }
    return Status::ok();
  });
}

bool narrow(DataType t) { return dtype_is_small_float(t) || dtype_is_subbyte_int(t); }

// Cast's and CastLike's `saturate` and `round_mode`.
Result<CastOptions> cast_options(const KernelInfo& info) {
  CastOptions o;
  if (const ir::Attribute* a = info.node.attr("saturate")) {
    if (a->type != ir::AttrType::kInt || (a->i != 0 && a->i != 1))
      return invalid_model(info.where() + "attribute 'saturate' must be 0 or 1");
    o.saturate = a->i != 0;
  }
  if (const ir::Attribute* a = info.node.attr("round_mode")) {
    if (a->type != ir::AttrType::kString) return invalid_model(info.where() + "attribute 'round_mode' must be a string");
    if (a->s == "up") o.e8m0_round = E8M0Round::kUp;
    else if (a->s == "down") o.e8m0_round = E8M0Round::kDown;
    else if (a->s == "nearest") o.e8m0_round = E8M0Round::kNearest;
    else return unsupported(info.where() + "round_mode '" + a->s + "' is not supported (up, down or nearest)");
  }
  return o;
}

}  // namespace

Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where) {
  return convert_into(src, dst, threads, where, CastOptions{});
}

Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where, const CastOptions& options) {
  if (src.numel() != dst.numel())
    return internal_error(where + "conversion between tensors of different sizes " + src.describe() + " and " + dst.describe());
  if (src.numel() == 0) return Status::ok();
  if (src.dtype() == dst.dtype() && narrow(src.dtype())) {
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return Status::ok();
  }
  if (narrow(src.dtype()) || narrow(dst.dtype())) return convert_narrow(src, dst, threads, where, options);
  return dispatch_any(src.dtype(), where, [&](auto st) -> Status {
    using S = typename decltype(st)::type;
    return dispatch_any(dst.dtype(), where, [&](auto dt) -> Status {
      using D = typename decltype(dt)::type;
      return convert_typed<S, D>(src, dst, threads, where);
    });
  });
}

void register_cast_kernels(KernelTable& t) {
  t.add("Cast", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Attribute* a = info.node.attr("to");
    if (!a) return invalid_model(info.where() + "missing required attribute 'to'");
    DataType to = DataType::kUndefined;
    if (a->type == ir::AttrType::kInt) to = static_cast<DataType>(a->i);
    else if (a->type == ir::AttrType::kString) to = dtype_from_onnx_name(a->s);
    if (!castable(to)) {
      std::string what = a->type == ir::AttrType::kString ? a->s : std::to_string(a->i);
      return unsupported(info.where() + "cast to element type " + what + " is not supported");
    }
    BH_ASSIGN_OR_RETURN(CastOptions options, cast_options(info));
    return make_kernel([to, options](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.input(0);
      if (!x) return invalid_argument(ctx.where() + "missing input 0");
      return cast_compute(ctx, *x, to, options);
    });
  });
  t.add("CastLike", 15, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(CastOptions options, cast_options(info));
    return make_kernel([options](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.input(0);
      const Tensor* like = ctx.input(1);
      if (!x || !like) return invalid_argument(ctx.where() + "CastLike needs two tensor inputs");
      if (!castable(like->dtype()))
        return unsupported(ctx.where() + "cast to element type " + dtype_name(like->dtype()) + " is not supported");
      return cast_compute(ctx, *x, like->dtype(), options);
    });
  });
}

}  // namespace bulkhead::cpu::ew
