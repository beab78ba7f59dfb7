// Quantisation kernels: QuantizeLinear, DequantizeLinear (per tensor, per axis and blocked;
// 8/16-bit integers, int4/uint4, int2/uint2, the float8 types and float4e2m1) and
// DynamicQuantizeLinear, QLinearMatMul, and the internal QLinearGemm (backend/qlinear_gemm.h)
// and QLinearGlobalAveragePool (backend/qlinear_pool.h).
//
// Arithmetic follows the ONNX reference: QuantizeLinear computes x / scale in float32,
// rounds half to even, adds the zero point and saturates to the target's range (small float
// targets instead convert x / scale + zero point as Cast does, with `saturate`);
// DequantizeLinear computes (x - zero_point) * scale in float32 and converts to the output
// type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/dnnl_int8.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/cast.h"
#include "backends/cpu/kernels/quant_util.h"
#include "backend/qlinear_conv_transpose.h"
#include "backend/qlinear_gemm.h"
#include "backend/qlinear_pool.h"
#include "bulkhead/dtype.h"

namespace bulkhead::cpu {
namespace {

// Scales and zero points are float32, float16 or bfloat16.
bool scale_type(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }

// The integer types a quantised tensor may have, with their ranges.
bool quant_int_type(DataType t) {
  switch (t) {
    case DataType::kUInt8: case DataType::kInt8: case DataType::kUInt16: case DataType::kInt16:
    case DataType::kUInt4: case DataType::kInt4: case DataType::kUInt2: case DataType::kInt2: return true;
    default: return false;
  }
}

void int_range(DataType t, int32_t* lo, int32_t* hi) {
  switch (t) {
    case DataType::kUInt8: *lo = 0; *hi = 255; break;
    case DataType::kInt8: *lo = -128; *hi = 127; break;
    case DataType::kUInt16: *lo = 0; *hi = 65535; break;
    case DataType::kInt16: *lo = -32768; *hi = 32767; break;
    case DataType::kUInt4: *lo = 0; *hi = 15; break;
    case DataType::kInt4: *lo = -8; *hi = 7; break;
    case DataType::kUInt2: *lo = 0; *hi = 3; break;
    case DataType::kInt2: *lo = -2; *hi = 1; break;
    default: *lo = std::numeric_limits<int32_t>::min(); *hi = std::numeric_limits<int32_t>::max(); break;
  }
}

// How scale and zero point map onto x: one value for all, one per index along `axis`, or
// one per block of `block` indices along `axis` (the scale then has x's rank, with
// ceil(D / block) along the axis).
struct Layout {
  int64_t outer = 1, D = 1, inner = 1;  // x as [outer, D, inner] around the axis
  enum class Kind { kTensor, kAxis, kBlocked } kind = Kind::kTensor;
  int64_t block = 0, blocks = 1;

  int64_t scale_index(int64_t i) const {
    if (kind == Kind::kTensor) return 0;
    const int64_t in = i % inner, d = (i / inner) % D;
    if (kind == Kind::kAxis) return d;
    const int64_t o = i / (inner * D);
    return (o * blocks + d / block) * inner + in;
  }
};

Result<Layout> quant_layout(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis_attr,
                            int64_t block) {
  Layout l;
  const bool one = [](const Tensor& t) { return t.numel() == 1 && t.rank() <= 1; }(scale);
  if (zp && zp->shape() != scale.shape() && !(block == 0 && one && zp->numel() == 1 && zp->rank() <= 1))
    return invalid_argument(ctx.where() + "zero point " + zp->describe() + " and scale " + scale.describe() + " differ in shape");
  const bool scalar = scale.rank() == 0 || (scale.rank() == 1 && scale.numel() == 1 && block == 0);
  if (scalar && block == 0) return l;
  if (x.rank() == 0) return invalid_argument(ctx.where() + "a scalar input takes a scalar scale, got " + scale.describe());
  BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, x.rank(), ctx.where()));
  l.D = x.dim(axis);
  for (int i = 0; i < axis; ++i) l.outer *= x.dim(i);
  for (int i = axis + 1; i < x.rank(); ++i) l.inner *= x.dim(i);
  if (block == 0) {
    if (scale.rank() != 1 || scale.dim(0) != l.D)
      return invalid_argument(ctx.where() + "per-axis scale must be 1-D with " + std::to_string(l.D) + " values (axis " +
                              std::to_string(axis) + " of " + x.describe() + "), got " + scale.describe());
    l.kind = Layout::Kind::kAxis;
    return l;
  }
  l.kind = Layout::Kind::kBlocked;
  l.block = block;
  l.blocks = (l.D + block - 1) / block;
  Shape want = x.shape();
  want[axis] = l.blocks;
  if (scale.shape() != want)
    return invalid_argument(ctx.where() + "blocked scale for " + x.describe() + " with block_size " + std::to_string(block) +
                            " along axis " + std::to_string(axis) + " must have shape " + shape_to_string(want) + ", got " +
                            scale.describe());
  return l;
}

// Attributes shared by QuantizeLinear and DequantizeLinear.
struct QuantAttrs {
  int64_t axis = 1;
  int64_t block = 0;
  DataType output_dtype = DataType::kUndefined;
  bool saturate = true;
  DataType precision = DataType::kUndefined;
};

Result<QuantAttrs> quant_attrs(const KernelInfo& info) {
  QuantAttrs a;
  a.axis = info.node.attr_int("axis", 1);
  a.block = info.node.attr_int("block_size", 0);
  if (a.block < 0) return invalid_model(info.where() + "block_size must be >= 0, got " + std::to_string(a.block));
  const int64_t od = info.node.attr_int("output_dtype", 0);
  if (od != 0) {
    if (!dtype_is_known(static_cast<int32_t>(od)))
      return unsupported(info.where() + "output_dtype " + std::to_string(od) + " is not a type bulkhead knows");
    a.output_dtype = static_cast<DataType>(od);
  }
  const int64_t sat = info.node.attr_int("saturate", 1);
  if (sat != 0 && sat != 1) return invalid_model(info.where() + "attribute 'saturate' must be 0 or 1");
  a.saturate = sat != 0;
  const int64_t prec = info.node.attr_int("precision", 0);
  if (prec != 0) {
    a.precision = static_cast<DataType>(prec);
    if (!scale_type(a.precision))
      return unsupported(info.where() + "precision " + dtype_name(a.precision) + " is not supported (float32, float16 or bfloat16)");
  }
  return a;
}

// ---------------------------------------------------------------------------------------
// QuantizeLinear

Status quantize_compute(KernelContext& ctx, const QuantAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "x"));
  BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 1, "y_scale"));
  BH_ASSIGN_OR_RETURN(const Tensor* zp, optional_input(ctx, 2, "y_zero_point"));
  const Tensor &x = *xp, &scale = *sp;
  if (!scale_type(x.dtype()) && x.dtype() != DataType::kInt32)
    return unsupported(ctx.where() + "input x must be float32, float16, bfloat16 or int32, got " + dtype_name(x.dtype()));
  if (!scale_type(scale.dtype()))
    return unsupported(ctx.where() + "y_scale must be float32, float16 or bfloat16, got " + dtype_name(scale.dtype()));
  DataType yt = zp ? zp->dtype() : a.output_dtype != DataType::kUndefined ? a.output_dtype : DataType::kUInt8;
  if (zp && a.output_dtype != DataType::kUndefined && a.output_dtype != zp->dtype())
    return invalid_argument(ctx.where() + "output_dtype " + dtype_name(a.output_dtype) + " differs from y_zero_point's type " +
                            dtype_name(zp->dtype()));
  const bool small = dtype_is_small_float(yt) && yt != DataType::kFloat8E8M0;
  if (!quant_int_type(yt) && !small)
    return unsupported(ctx.where() + "cannot quantise to " + dtype_name(yt));
  BH_ASSIGN_OR_RETURN(Layout l, quant_layout(ctx, x, scale, zp, a.axis, a.block));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, yt, x.shape()));
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  int32_t lo = 0, hi = 0;
  int_range(yt, &lo, &hi);
  uint8_t* y8 = static_cast<uint8_t*>(y.raw());
  // x / scale is computed in `precision` (by default the scale's type): in float32, then
  // rounded to float16 or bfloat16, which is the correctly rounded quotient in that type
  // (float32 has more than twice their precision plus two bits).
  const DataType prec = a.precision != DataType::kUndefined ? a.precision : scale.dtype();
  if (l.kind == Layout::Kind::kTensor && x.dtype() == DataType::kFloat32 && prec == DataType::kFloat32 &&
      scale.dtype() == DataType::kFloat32 && (yt == DataType::kUInt8 || yt == DataType::kInt8)) {
    // The usual case (QDQ activations), the same arithmetic with the per-element lookups
    // hoisted: the quotient in float32, rounded half to even, the zero point, saturation.
    const float sc = scale.data<float>()[0], z = zp ? static_cast<float>(int_at(*zp, 0)) : 0.0f;
    const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
    const float* xv = x.data<float>();
    // Clamped to the representable range less the zero point first (the bounds are whole
    // numbers, so clamping and rounding commute), then rounded half to even by adding and
    // subtracting 1.5 * 2^23, exact for such small values in the default rounding mode;
    // NaN survives both and becomes the zero point. Written so that it vectorises.
    const float rlo = flo - z, rhi = fhi - z;
    parallel_for(ctx.threads(), n, 1 << 15, [&](int64_t b, int64_t e) {
      if (yt == DataType::kUInt8) quantize_rows(xv + b, y8 + b, e - b, sc, z, rlo, rhi);
      else quantize_rows(xv + b, reinterpret_cast<int8_t*>(y8) + b, e - b, sc, z, rlo, rhi);
    });
    return Status::ok();
  }
  auto in_precision = [prec](float q) {
    if (prec == DataType::kFloat16) return half_to_float(float_to_half(q));
    if (prec == DataType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(q));
    return q;
  };
  parallel_for(ctx.threads(), n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = l.scale_index(i);
      const float q = in_precision(float_at(x, i) / float_at(scale, s));
      if (small) {
        const float z = zp ? float_at(*zp, s) : 0.0f;
        y8[i] = float_to_small_float(yt, static_cast<double>(q + z), a.saturate);
        continue;
      }
      const double r = std::nearbyint(static_cast<double>(q)) + (zp ? int_at(*zp, s) : 0);
      const int32_t v = std::isnan(r) ? (zp ? int_at(*zp, s) : 0)
                                      : static_cast<int32_t>(std::clamp(r, static_cast<double>(lo), static_cast<double>(hi)));
      switch (yt) {
        case DataType::kUInt16: y.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
        case DataType::kInt16: y.data<int16_t>()[i] = static_cast<int16_t>(v); break;
        default: y8[i] = static_cast<uint8_t>(v); break;
      }
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// DequantizeLinear

Status dequantize_compute(KernelContext& ctx, const QuantAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "x"));
  BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 1, "x_scale"));
  BH_ASSIGN_OR_RETURN(const Tensor* zp, optional_input(ctx, 2, "x_zero_point"));
  const Tensor &x = *xp, &scale = *sp;
  const DataType xt = x.dtype();
  const bool small = dtype_is_small_float(xt);
  if (!quant_int_type(xt) && xt != DataType::kInt32 && !small)
    return unsupported(ctx.where() + "cannot dequantise " + dtype_name(xt));
  if (!scale_type(scale.dtype()))
    return unsupported(ctx.where() + "x_scale must be float32, float16 or bfloat16, got " + dtype_name(scale.dtype()));
  if (zp && zp->dtype() != xt)
    return invalid_argument(ctx.where() + "x_zero_point is " + dtype_name(zp->dtype()) + ", x is " + dtype_name(xt));
  DataType yt = a.output_dtype != DataType::kUndefined ? a.output_dtype : scale.dtype();
  if (!scale_type(yt)) return unsupported(ctx.where() + "cannot dequantise to " + dtype_name(yt));
  BH_ASSIGN_OR_RETURN(Layout l, quant_layout(ctx, x, scale, zp, a.axis, a.block));
  const int64_t n = x.numel();
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, yt, x.shape()));
  if (n == 0) return Status::ok();
  if (l.kind == Layout::Kind::kTensor && yt == DataType::kFloat32 && scale.dtype() == DataType::kFloat32 &&
      (xt == DataType::kUInt8 || xt == DataType::kInt8)) {
    // The usual case (QDQ activations and weights), with the lookups hoisted.
    const float sc = scale.data<float>()[0];
    const int32_t z = zp ? int_at(*zp, 0) : 0;
    float* yv = y.data<float>();
    parallel_for(ctx.threads(), n, 1 << 15, [&](int64_t b, int64_t e) {
      if (xt == DataType::kUInt8) dequantize_rows(x.data<uint8_t>() + b, yv + b, e - b, z, sc);
      else dequantize_rows(x.data<int8_t>() + b, yv + b, e - b, z, sc);
    });
    return Status::ok();
  }
  Tensor f = yt == DataType::kFloat32 ? y : Tensor::host(DataType::kFloat32, x.shape());
  float* fp = f.data<float>();
  parallel_for(ctx.threads(), n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = l.scale_index(i);
      float v;
      if (small) v = float_at(x, i) - (zp ? float_at(*zp, s) : 0.0f);
      else v = static_cast<float>(int64_t{int_at(x, i)} - (zp ? int_at(*zp, s) : 0));
      fp[i] = v * float_at(scale, s);
    }
  });
  if (yt != DataType::kFloat32) return ew::convert_into(f, y, ctx.threads(), ctx.where());
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// DynamicQuantizeLinear: uint8 with scale = (max(0, max x) - min(0, min x)) / 255 and
// zero_point = saturate(round(-min / scale)).

Status dynamic_quantize_compute(KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "x"));
  const Tensor& x = *xp;
  if (x.dtype() != DataType::kFloat32)
    return unsupported(ctx.where() + "input x must be float32, got " + dtype_name(x.dtype()));
  const float* xv = x.data<float>();
  const int64_t n = x.numel();
  // The range covers the finite values (and zero); NaN quantises to the zero point,
  // infinities to 0 and 255.
  float mn = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(xv[i])) {
      mn = std::min(mn, xv[i]);
      mx = std::max(mx, xv[i]);
    }
  const float scale = (mx - mn) / 255.0f;
  float zero = 0.0f;
  if (scale != 0.0f) zero = std::clamp(std::nearbyint(0.0f - mn / scale), 0.0f, 255.0f);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kUInt8, x.shape()));
  BH_ASSIGN_OR_RETURN(Tensor ys, ctx.allocate_output(1, DataType::kFloat32, {}));
  BH_ASSIGN_OR_RETURN(Tensor yz, ctx.allocate_output(2, DataType::kUInt8, {}));
  ys.data<float>()[0] = scale;
  yz.data<uint8_t>()[0] = static_cast<uint8_t>(zero);
  uint8_t* yv = y.data<uint8_t>();
  parallel_for(ctx.threads(), n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float q = scale == 0.0f ? zero : std::nearbyint(xv[i] / scale) + zero;
      if (std::isnan(q)) q = zero;
      yv[i] = static_cast<uint8_t>(std::clamp(q, 0.0f, 255.0f));
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// QLinearMatMul: y = saturate(round((a - a_zero_point) x (b - b_zero_point) * a_scale *
// b_scale / y_scale) + y_zero_point), the products summed exactly; a's scale and zero point
// per tensor or per row ([M]), b's per tensor or per column ([N]).
//
// QLinearGemm (domain "bulkhead", backend/qlinear_gemm.h) is the same with an optional
// ninth input, an int32 bias [N] of scale a_scale * b_scale added to every row's sums
// before the requantisation.

Status qlinear_matmul_compute(KernelContext& ctx, bool gemm) {
  const char* op = gemm ? "QLinearGemm" : "QLinearMatMul";
  const char* names[9] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point", "bias"};
  const Tensor* in[9] = {};
  for (int i = 0; i < (gemm ? 9 : 8); ++i) {
    BH_ASSIGN_OR_RETURN(in[i], i >= 7 ? optional_input(ctx, i, names[i]) : required_input(ctx, i, names[i]));
  }
  const Tensor &A = *in[0], &B = *in[3];
  auto eight_bit = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (!eight_bit(A.dtype()) || !eight_bit(B.dtype()))
    return unsupported(ctx.where() + op + " takes int8/uint8 a and b, got " + dtype_name(A.dtype()) + " and " + dtype_name(B.dtype()));
  for (int i : {1, 4, 6})
    if (!scale_type(in[i]->dtype()))
      return unsupported(ctx.where() + names[i] + " must be float32, float16 or bfloat16, got " + dtype_name(in[i]->dtype()));
  if (A.rank() < 2 || B.rank() < 2 || A.dim(-1) != B.dim(-2))
    return invalid_argument(ctx.where() + "cannot multiply " + A.describe() + " by " + B.describe());
  // Batch dimensions broadcast as MatMul's do.
  const int r = std::max(A.rank(), B.rank());
  Shape batch(static_cast<size_t>(r - 2), 1);
  for (int i = 0; i < r - 2; ++i) {
    const int ia = i - (r - A.rank()), ib = i - (r - B.rank());
    const int64_t da = ia >= 0 ? A.dim(ia) : 1, db = ib >= 0 ? B.dim(ib) : 1;
    if (da != db && da != 1 && db != 1)
      return invalid_argument(ctx.where() + "batch dimensions of " + A.describe() + " and " + B.describe() + " do not broadcast");
    batch[i] = std::max(da, db);
  }
  const int64_t M = A.dim(-2), K = A.dim(-1), N = B.dim(-1);
  auto per = [&](int s, int z, int64_t n, const char* what) -> Status {
    const int64_t c = in[s]->numel();
    if (c != 1 && c != n)
      return invalid_argument(ctx.where() + what + " scale must hold one value or " + std::to_string(n) + ", got " + in[s]->describe());
    if (in[z] && in[z]->numel() != c)
      return invalid_argument(ctx.where() + what + " zero point " + in[z]->describe() + " does not match its scale " + in[s]->describe());
    return Status::ok();
  };
  BH_RETURN_IF_ERROR(per(1, 2, M, "a's"));
  BH_RETURN_IF_ERROR(per(4, 5, N, "b's"));
  if (in[6]->numel() != 1) return invalid_argument(ctx.where() + "y_scale must hold one value, got " + in[6]->describe());
  if ((in[2] && in[2]->dtype() != A.dtype()) || (in[5] && in[5]->dtype() != B.dtype()))
    return invalid_argument(ctx.where() + "zero points must have the types of a and b");
  const DataType yt = in[7] ? in[7]->dtype() : DataType::kUInt8;
  if (!eight_bit(yt)) return unsupported(ctx.where() + "y_zero_point must be int8 or uint8, got " + dtype_name(yt));
  const Tensor* bias = in[8];
  if (bias && (bias->dtype() != DataType::kInt32 || bias->rank() != 1 || bias->dim(0) != N))
    return invalid_argument(ctx.where() + "bias must be int32 [" + std::to_string(N) + "], got " + bias->describe());
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, yt, out));
  const int64_t nb = shape_numel(batch);
  int32_t lo = 0, hi = 0;
  int_range(yt, &lo, &hi);
  const float ys = float_at(*in[6], 0);
  const int32_t yz = in[7] ? int_at(*in[7], 0) : 0;
  for (int64_t bi = 0; bi < nb; ++bi) {
    // The offsets of this batch element in A and B (broadcast dimensions repeat).
    int64_t ao = 0, bo = 0, rem = bi, sa = 1, sb = 1;
    for (int i = r - 3; i >= 0; --i) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      const int ia = i - (r - A.rank()), ib = i - (r - B.rank());
      if (ia >= 0) {
        if (A.dim(ia) != 1) ao += idx * sa;
        sa *= A.dim(ia);
      }
      if (ib >= 0) {
        if (B.dim(ib) != 1) bo += idx * sb;
        sb *= B.dim(ib);
      }
    }
    ao *= M * K;
    bo *= K * N;
    for (int64_t m = 0; m < M; ++m) {
      const int64_t am = in[1]->numel() == 1 ? 0 : m;
      const int32_t za = in[2] ? int_at(*in[2], am) : 0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t bn = in[4]->numel() == 1 ? 0 : n;
        const int32_t zb = in[5] ? int_at(*in[5], bn) : 0;
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += int64_t{int_at(A, ao + m * K + k) - za} * (int_at(B, bo + k * N + n) - zb);
        if (bias) acc += bias->data<int32_t>()[n];
        const float mult = float_at(*in[1], am) * float_at(*in[4], bn) / ys;
        double v = std::nearbyint(static_cast<double>(static_cast<float>(acc) * mult)) + yz;
        if (std::isnan(v)) v = yz;  // a NaN or zero scale: the zero point
        const int32_t q = static_cast<int32_t>(std::clamp(v, static_cast<double>(lo), static_cast<double>(hi)));
        static_cast<uint8_t*>(y.raw())[(bi * M + m) * N + n] = static_cast<uint8_t>(q);
      }
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// QLinearGlobalAveragePool (internal, backend/qlinear_pool.h).

struct QGapAttrs {
  double xs = 1, ys = 1;
  int32_t zx = 0, zy = 0;
  DataType yt = DataType::kUInt8;
  bool nhwc = false;
};

template <typename T>
Status qlinear_global_average_pool(KernelContext& ctx, const Tensor& x, const QGapAttrs& a) {
  const int64_t N = x.dim(0), C = x.dim(a.nhwc ? x.rank() - 1 : 1);
  const int64_t S = N * C == 0 ? 0 : x.numel() / (N * C);
  Shape ys(static_cast<size_t>(x.rank()), 1);
  ys[0] = N;
  ys[a.nhwc ? ys.size() - 1 : 1] = C;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, a.yt, ys));
  if (N * C == 0) return Status::ok();
  if (S == 0) return invalid_argument(ctx.where() + "empty spatial extent in " + x.describe());
  const T* xp = x.data<T>();
  uint8_t* out = static_cast<uint8_t*>(y.raw());
  int32_t lo = 0, hi = 0;
  int_range(a.yt, &lo, &hi);
  // (sum - S·zx) · (xs / ys) / S, rounded half to even.
  const double mult = a.xs / a.ys / static_cast<double>(S);
  auto finish = [&](int64_t sum) {
    double v = std::nearbyint(static_cast<double>(sum - S * int64_t{a.zx}) * mult) + a.zy;
    if (std::isnan(v)) v = a.zy;
    return static_cast<uint8_t>(static_cast<int32_t>(std::clamp(v, static_cast<double>(lo), static_cast<double>(hi))));
  };
  if (a.nhwc) {
    // Rows of C values: one int64 sum per channel (int32 partial sums of up to 2^23 rows).
    parallel_for(ctx.threads(), N, 1, [&](int64_t b, int64_t e) {
      std::vector<int64_t> sum(static_cast<size_t>(C));
      std::vector<int32_t> part(static_cast<size_t>(C));
      for (int64_t n = b; n < e; ++n) {
        std::fill(sum.begin(), sum.end(), 0);
        for (int64_t s0 = 0; s0 < S; s0 += int64_t{1} << 23) {
          std::fill(part.begin(), part.end(), 0);
          const int64_t s1 = std::min(S, s0 + (int64_t{1} << 23));
          for (int64_t s = s0; s < s1; ++s) {
            const T* row = xp + (n * S + s) * C;
            for (int64_t c = 0; c < C; ++c) part[c] += row[c];
          }
          for (int64_t c = 0; c < C; ++c) sum[c] += part[c];
        }
        for (int64_t c = 0; c < C; ++c) out[n * C + c] = finish(sum[c]);
      }
    });
  } else {
    parallel_for(ctx.threads(), N * C, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* p = xp + i * S;
        int64_t sum = 0;
        for (int64_t s0 = 0; s0 < S; s0 += int64_t{1} << 23) {
          int32_t part = 0;
          const int64_t s1 = std::min(S, s0 + (int64_t{1} << 23));
          for (int64_t s = s0; s < s1; ++s) part += p[s];
          sum += part;
        }
        out[i] = finish(sum);
      }
    });
  }
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_qlinear_global_average_pool(const KernelInfo& info) {
  const ir::Node& n = info.node;
  QGapAttrs a;
  a.xs = n.attr_float("_x_scale", 1.f);
  a.ys = n.attr_float("_y_scale", 1.f);
  a.zx = static_cast<int32_t>(n.attr_int("_x_zero_point", 0));
  a.zy = static_cast<int32_t>(n.attr_int("_y_zero_point", 0));
  a.yt = static_cast<DataType>(n.attr_int("_y_type", static_cast<int64_t>(DataType::kUInt8)));
  const std::string layout = n.attr_string("_layout", "");
  if (!layout.empty() && layout != "nhwc")
    return invalid_argument(info.where() + "unsupported _layout '" + layout + "' (only nhwc)");
  a.nhwc = layout == "nhwc";
  if (a.yt != DataType::kUInt8 && a.yt != DataType::kInt8) return invalid_argument(info.where() + "_y_type must be uint8 or int8");
  int32_t lo = 0, hi = 0;
  int_range(a.yt, &lo, &hi);
  if (a.zy < lo || a.zy > hi || a.zx < -128 || a.zx > 255)
    return invalid_argument(info.where() + "zero points out of their types' ranges");
  if (!(a.xs > 0) || !(a.ys > 0) || !std::isfinite(a.xs) || !std::isfinite(a.ys))
    return invalid_argument(info.where() + "_x_scale and _y_scale must be positive and finite");
  return make_kernel([a](KernelContext& ctx) -> Status {
    BH_ASSIGN_OR_RETURN(const Tensor* x, required_input(ctx, 0, "X"));
    if (x->rank() < 3 || (a.nhwc && x->rank() != 4))
      return invalid_argument(ctx.where() + "X must be [N, C, spatial...]" + (a.nhwc ? " channels-last, rank 4" : "") +
                              ", got " + x->describe());
    if (x->dtype() == DataType::kUInt8) return qlinear_global_average_pool<uint8_t>(ctx, *x, a);
    if (x->dtype() == DataType::kInt8) return qlinear_global_average_pool<int8_t>(ctx, *x, a);
    return unsupported(ctx.where() + "X must be uint8 or int8, got " + x->describe());
  });
}

}  // namespace

void register_quant_eltwise_kernels(KernelTable& t);  // quant_eltwise.cc

void register_quantize_kernels(KernelTable& t) {
  register_quant_eltwise_kernels(t);
  t.add("QuantizeLinear", 10, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(QuantAttrs a, quant_attrs(info));
    if (a.output_dtype != DataType::kUndefined && !quant_int_type(a.output_dtype) &&
        !(dtype_is_small_float(a.output_dtype) && a.output_dtype != DataType::kFloat8E8M0))
      return unsupported(info.where() + "cannot quantise to output_dtype " + dtype_name(a.output_dtype));
    return make_kernel([a](KernelContext& ctx) { return quantize_compute(ctx, a); });
  });
  t.add("DequantizeLinear", 10, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(QuantAttrs a, quant_attrs(info));
    if (a.output_dtype != DataType::kUndefined && !scale_type(a.output_dtype))
      return unsupported(info.where() + "cannot dequantise to output_dtype " + dtype_name(a.output_dtype) +
                         " (float32, float16 or bfloat16)");
    return make_kernel([a](KernelContext& ctx) { return dequantize_compute(ctx, a); });
  });
  t.add("QLinearMatMul", 10, [](const KernelInfo& info) {
    return make_int8_matmul(info, Int8MatMulKind::kQLinear,
                            [](KernelContext& ctx) { return qlinear_matmul_compute(ctx, false); });
  });
  t.add(
      kQLinearGemm, 1,
      [](const KernelInfo& info) {
        return make_int8_matmul(info, Int8MatMulKind::kQLinearGemm,
                                [](KernelContext& ctx) { return qlinear_matmul_compute(ctx, true); });
      },
      kQLinearGemmDomain);
  t.add(kQLinearConvTranspose, 1, make_qlinear_conv_transpose, kQLinearConvTransposeDomain);
  t.add(kQLinearGlobalAveragePool, 1, make_qlinear_global_average_pool, kQLinearPoolDomain);
  t.add("DynamicQuantizeLinear", 11, [](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> {
    return make_kernel(dynamic_quantize_compute);
  });
}

}  // namespace bulkhead::cpu
