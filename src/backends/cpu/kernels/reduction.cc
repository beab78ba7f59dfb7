// Reductions (Reduce*, ArgMax/ArgMin), the softmax family and normalisations.
//
// Reductions whose reduced axes form a suffix of the shape run directly on contiguous
// rows; other axis sets are permuted (kept axes first) into scratch memory first, so
// every reduction is a row reduction. Softmax-like ops work on [outer, K, inner]
// blocks: contiguous rows when inner == 1, lane-wise over inner otherwise.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/reduction_util.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu {
namespace {

using redutil::exp_ps;
using redutil::from_float32;
using redutil::is_half;
using redutil::row_max;
using redutil::row_sum;
using redutil::to_float32;

// float32, float64, float16, bfloat16: the softmax family and the normalisations.
constexpr TypeSupport kFloatTypes{ew::kFloats, true};

int64_t prod_range(const Shape& s, int b, int e) {
  int64_t p = 1;
  for (int i = b; i < e; ++i) p *= s[i];
  return p;
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

Status copy_to_output(KernelContext& ctx, int i, const Tensor& x) {
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(i, x.dtype(), x.shape()));
  if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
  return Status::ok();
}

// =====================================================================================
// Reduce*
// =====================================================================================

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <typename T>
struct AccOf {
  using type = std::conditional_t<kIsFloat<T>, T, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
};

template <typename T>
T reduce_row(Red op, const T* x, int64_t n) {
  using A = typename AccOf<T>::type;
  switch (op) {
    case Red::kSum: {
      if constexpr (kIsFloat<T>) {
        return row_sum(x, n);
      } else {
        A s = 0;
        for (int64_t i = 0; i < n; ++i) s += x[i];
        return static_cast<T>(s);
      }
    }
    case Red::kMean: {
      if constexpr (kIsFloat<T>) {
        return row_sum(x, n) / static_cast<T>(n);  // 0/0 = NaN for an empty set, as ONNX
      } else {
        A s = 0;
        for (int64_t i = 0; i < n; ++i) s += x[i];
        return n ? static_cast<T>(static_cast<double>(s) / static_cast<double>(n)) : T(0);
      }
    }
    case Red::kMax: {
      if constexpr (kIsFloat<T>) {
        return row_max(x, n);
      } else {
        T m = std::numeric_limits<T>::lowest();
        for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
        return m;
      }
    }
    case Red::kMin: {
      T m = kIsFloat<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
      for (int64_t i = 0; i < n; ++i) m = x[i] < m ? x[i] : m;
      return m;
    }
    case Red::kProd: {
      A p = 1;
      for (int64_t i = 0; i < n; ++i) p *= x[i];
      return static_cast<T>(p);
    }
    case Red::kL1: {
      A s = 0;
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_signed_v<T>) s += x[i] < 0 ? -A(x[i]) : A(x[i]);
        else s += x[i];
      }
      return static_cast<T>(s);
    }
    case Red::kL2:
    case Red::kSumSquare: {
      A s = 0;
      for (int64_t i = 0; i < n; ++i) s += A(x[i]) * A(x[i]);
      if (op == Red::kSumSquare) return static_cast<T>(s);
      return static_cast<T>(std::sqrt(static_cast<double>(s)));
    }
    case Red::kLogSum: {
      A s = 0;
      if constexpr (kIsFloat<T>) s = row_sum(x, n);
      else for (int64_t i = 0; i < n; ++i) s += x[i];
      if constexpr (kIsFloat<T>) return std::log(s);
      else return static_cast<T>(std::log(static_cast<double>(s)));
    }
    case Red::kLogSumExp: {
      if constexpr (kIsFloat<T>) {
        T m = row_max(x, n);
        if (std::isinf(m) || std::isnan(m)) return m;  // empty set, all -inf, or +inf present
        T s = 0;
        for (int64_t i = 0; i < n; ++i) s += exp_ps(x[i] - m);
        return m + std::log(s);
      } else {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
        if (n == 0) return std::numeric_limits<T>::lowest();
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
        return static_cast<T>(m + std::log(s));
      }
    }
  }
  return T(0);
}

template <typename T>
void reduce_rows(Red op, const T* x, T* y, int64_t outer, int64_t K, int threads) {
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1));
  parallel_for(threads, outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = reduce_row<T>(op, x + i * K, K);
  });
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(Red op, bool axes_input, std::vector<int64_t> axes, bool keepdims, bool noop)
      : op_(op), axes_input_(axes_input), attr_axes_(std::move(axes)), keepdims_(keepdims), noop_(noop) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "data"));
    const Tensor& x = *xp;
    std::vector<int64_t> axes = attr_axes_;
    if (axes_input_) {
      axes.clear();
      if (const Tensor* a = ctx.input(1)) {
        if (a->dtype() != DataType::kInt64 && a->dtype() != DataType::kInt32)
          return invalid_argument(ctx.where() + "axes must be int64, got " + dtype_name(a->dtype()));
        if (a->rank() > 1) return invalid_argument(ctx.where() + "axes must be 1-D, got " + shape_to_string(a->shape()));
        axes = read_int_tensor(*a);
      }
    }
    int r = x.rank();
    if (axes.empty() && noop_) return copy_to_output(ctx, 0, x);
    std::vector<bool> red(r, axes.empty());
    for (int64_t a : axes) {
      BH_ASSIGN_OR_RETURN(int ax, normalize_axis(a, r, ctx.where()));
      if (r == 0) continue;
      if (red[ax]) return invalid_argument(ctx.where() + "axis " + std::to_string(a) + " appears twice in axes");
      red[ax] = true;
    }
    Shape out_shape, kept_shape, perm_shape;
    std::vector<int> perm;
    for (int i = 0; i < r; ++i) {
      if (!red[i]) {
        out_shape.push_back(x.shape()[i]);
        perm.push_back(i);
      } else if (keepdims_) {
        out_shape.push_back(1);
      }
    }
    int64_t outer = 1;
    for (int i : perm) outer *= x.shape()[i];
    int nkept = static_cast<int>(perm.size());
    for (int i = 0; i < r; ++i)
      if (red[i]) perm.push_back(i);
    bool suffix = true;
    for (int i = 0; i < r; ++i)
      if (perm[i] != i) suffix = false;
    int64_t K = 1;
    for (int i = nkept; i < r; ++i) K *= x.shape()[perm[i]];
    for (int i : perm) perm_shape.push_back(x.shape()[i]);

    DataType dt = x.dtype();
    if (dt == DataType::kBool && op_ != Red::kMax && op_ != Red::kMin)
      return unsupported(ctx.where() + "unsupported element type bool");
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, out_shape));
    if (shape_numel(out_shape) == 0) return Status::ok();

    Tensor src = x;
    if (is_half(dt)) src = to_float32(x);
    if (!suffix && x.numel() > 0) {
      BH_ASSIGN_OR_RETURN(Tensor p, ctx.allocate_scratch(src.dtype(), perm_shape));
      redutil::permute_bytes(src.raw(), src.shape(), perm, dtype_size(src.dtype()), p.raw());
      src = p;
    }
    int th = ctx.threads();
    switch (dt) {
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<float> tmp(static_cast<size_t>(outer));
        reduce_rows<float>(op_, src.data<float>(), tmp.data(), outer, K, th);
        from_float32(tmp.data(), y);
        break;
      }
      case DataType::kFloat32: reduce_rows<float>(op_, src.data<float>(), y.data<float>(), outer, K, th); break;
      case DataType::kFloat64: reduce_rows<double>(op_, src.data<double>(), y.data<double>(), outer, K, th); break;
      case DataType::kInt32: reduce_rows<int32_t>(op_, src.data<int32_t>(), y.data<int32_t>(), outer, K, th); break;
      case DataType::kInt64: reduce_rows<int64_t>(op_, src.data<int64_t>(), y.data<int64_t>(), outer, K, th); break;
      case DataType::kUInt32: reduce_rows<uint32_t>(op_, src.data<uint32_t>(), y.data<uint32_t>(), outer, K, th); break;
      case DataType::kUInt64: reduce_rows<uint64_t>(op_, src.data<uint64_t>(), y.data<uint64_t>(), outer, K, th); break;
      case DataType::kInt8: reduce_rows<int8_t>(op_, src.data<int8_t>(), y.data<int8_t>(), outer, K, th); break;
      case DataType::kUInt8:
      case DataType::kBool: reduce_rows<uint8_t>(op_, src.data<uint8_t>(), y.data<uint8_t>(), outer, K, th); break;
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  Red op_;
  bool axes_input_;
  std::vector<int64_t> attr_axes_;
  bool keepdims_;
  bool noop_;
};

KernelFactory reduce_factory(Red op, bool axes_input) {
  return [op, axes_input](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Node& n = info.node;
    // With noop_with_empty_axes an absent axes input passes any tensor through unchanged.
    const bool noop = axes_input && n.attr_int("noop_with_empty_axes", 0) != 0;
    const unsigned bool_ok = op == Red::kMax || op == Red::kMin ? ew::kBoolT : 0u;
    if (!noop)
      BH_RETURN_IF_ERROR(check_input_type(
          info, 0, {ew::kFloats | ew::kI8 | ew::kI32 | ew::kI64 | ew::kU8 | ew::kU32 | ew::kU64 | bool_ok, true}));
    return std::unique_ptr<Kernel>(std::make_unique<ReduceKernel>(
        op, axes_input, axes_input ? std::vector<int64_t>{} : n.attr_ints("axes"), n.attr_int("keepdims", 1) != 0,
        axes_input && n.attr_int("noop_with_empty_axes", 0) != 0));
  };
}

// =====================================================================================
// ArgMax / ArgMin
// =====================================================================================

template <typename T>
void arg_reduce(const T* x, int64_t* y, int64_t outer, int64_t K, int64_t inner, bool is_max, bool last, int threads) {
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(K * inner, 1));
  parallel_for(threads, outer, grain, [&](int64_t b, int64_t e) {
    std::vector<T> best(static_cast<size_t>(inner));
    for (int64_t o = b; o < e; ++o) {
      const T* xo = x + o * K * inner;
      int64_t* yo = y + o * inner;
      for (int64_t i = 0; i < inner; ++i) {
        best[i] = xo[i];
        yo[i] = 0;
      }
      for (int64_t k = 1; k < K; ++k) {
        const T* row = xo + k * inner;
        for (int64_t i = 0; i < inner; ++i) {
          T v = row[i];
          bool take = is_max ? (last ? v >= best[i] : v > best[i]) : (last ? v <= best[i] : v < best[i]);
          best[i] = take ? v : best[i];
          yo[i] = take ? k : yo[i];
        }
      }
    }
  });
}

class ArgKernel final : public Kernel {
 public:
  ArgKernel(bool is_max, int64_t axis, bool keepdims, bool last)
      : is_max_(is_max), axis_(axis), keepdims_(keepdims), last_(last) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "data"));
    const Tensor& x = *xp;
    int r = x.rank();
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_, r, ctx.where()));
    int64_t K = r ? x.shape()[axis] : 1;
    int64_t outer = r ? prod_range(x.shape(), 0, axis) : 1;
    int64_t inner = r ? prod_range(x.shape(), axis + 1, r) : 1;
    Shape os;
    for (int i = 0; i < r; ++i) {
      if (i == axis) {
        if (keepdims_) os.push_back(1);
      } else {
        os.push_back(x.shape()[i]);
      }
    }
    if (K == 0 && outer * inner > 0)
      return invalid_argument(ctx.where() + "cannot take the arg" + (is_max_ ? "max" : "min") + " of an empty axis");
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kInt64, os));
    if (y.numel() == 0) return Status::ok();
    int64_t* yp = y.data<int64_t>();
    int th = ctx.threads();
    DataType dt = x.dtype();
    switch (dt) {
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor f = to_float32(x);
        arg_reduce<float>(f.data<float>(), yp, outer, K, inner, is_max_, last_, th);
        break;
      }
      case DataType::kFloat32: arg_reduce<float>(x.data<float>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kFloat64: arg_reduce<double>(x.data<double>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kInt32: arg_reduce<int32_t>(x.data<int32_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kInt64: arg_reduce<int64_t>(x.data<int64_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kUInt32: arg_reduce<uint32_t>(x.data<uint32_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kUInt64: arg_reduce<uint64_t>(x.data<uint64_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kInt16: arg_reduce<int16_t>(x.data<int16_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kUInt16: arg_reduce<uint16_t>(x.data<uint16_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kInt8: arg_reduce<int8_t>(x.data<int8_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      case DataType::kUInt8: arg_reduce<uint8_t>(x.data<uint8_t>(), yp, outer, K, inner, is_max_, last_, th); break;
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_;
  bool last_;
};

KernelFactory arg_factory(bool is_max) {
  return [is_max](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Node& n = info.node;
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {ew::kNumeric, true}));
    return std::unique_ptr<Kernel>(std::make_unique<ArgKernel>(is_max, n.attr_int("axis", 0), n.attr_int("keepdims", 1) != 0,
                                                               n.attr_int("select_last_index", 0) != 0));
  };
}

// =====================================================================================
// Softmax / LogSoftmax / Hardmax
// =====================================================================================

enum class Sm { kSoftmax, kLogSoftmax, kHardmax };

template <typename T>
void softmax_row(Sm kind, const T* x, T* y, int64_t K) {
  if (K == 0) return;
  if (kind == Sm::kHardmax) {
    int64_t bi = 0;
    for (int64_t k = 1; k < K; ++k)
      if (x[k] > x[bi]) bi = k;
    for (int64_t k = 0; k < K; ++k) y[k] = T(0);
    y[bi] = T(1);
    return;
  }
  T m = row_max(x, K);
  if (std::isinf(m) && m < 0) {  // every entry is -inf: no probability mass anywhere
    T fill = kind == Sm::kSoftmax ? T(0) : -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < K; ++k) y[k] = fill;
    return;
  }
  T s = redutil::exp_sub_sum(x, m, y, K);
  if (kind == Sm::kSoftmax) {
    T inv = T(1) / s;
    for (int64_t k = 0; k < K; ++k) y[k] *= inv;
  } else {
    T off = m + std::log(s);
    for (int64_t k = 0; k < K; ++k) y[k] = x[k] - off;
  }
}

// One [K, inner] block, lane-wise over inner.
template <typename T>
void softmax_block(Sm kind, const T* x, T* y, int64_t K, int64_t inner, std::vector<T>& m, std::vector<T>& s) {
  m.assign(static_cast<size_t>(inner), -std::numeric_limits<T>::infinity());
  s.assign(static_cast<size_t>(inner), T(0));
  if (kind == Sm::kHardmax) {
    std::vector<int64_t> bi(static_cast<size_t>(inner), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        T v = x[k * inner + i];
        if (k == 0 || v > m[i]) {
          m[i] = v;
          bi[i] = k;
        }
      }
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < inner; ++i) y[k * inner + i] = bi[i] == k ? T(1) : T(0);
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < inner; ++i) m[i] = x[k * inner + i] > m[i] ? x[k * inner + i] : m[i];
  for (int64_t i = 0; i < inner; ++i)
    if (std::isinf(m[i]) && m[i] < 0) m[i] = 0;  // all -inf: exp gives 0, sum 0
  for (int64_t k = 0; k < K; ++k) redutil::exp_sub_lanes(x + k * inner, m.data(), y + k * inner, s.data(), inner);
  if (kind == Sm::kSoftmax) {
    for (int64_t i = 0; i < inner; ++i) s[i] = s[i] > 0 ? T(1) / s[i] : T(0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < inner; ++i) y[k * inner + i] *= s[i];
  } else {
    for (int64_t i = 0; i < inner; ++i) s[i] = m[i] + std::log(s[i]);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < inner; ++i) y[k * inner + i] = x[k * inner + i] - s[i];
  }
}

template <typename T>
void softmax_run(Sm kind, const T* x, T* y, int64_t outer, int64_t K, int64_t inner, int threads) {
  if (inner == 1) {
    int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(K, 1));
    parallel_for(threads, outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) softmax_row<T>(kind, x + o * K, y + o * K, K);
    });
    return;
  }
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(K * inner, 1));
  parallel_for(threads, outer, grain, [&](int64_t b, int64_t e) {
    std::vector<T> m, s;
    for (int64_t o = b; o < e; ++o) softmax_block<T>(kind, x + o * K * inner, y + o * K * inner, K, inner, m, s);
  });
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(Sm kind, int64_t axis, bool legacy) : kind_(kind), axis_(axis), legacy_(legacy) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "input"));
    const Tensor& x = *xp;
    int r = x.rank();
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_, r, ctx.where()));
    int64_t outer = 1, K = 1, inner = 1;
    if (r > 0) {
      outer = prod_range(x.shape(), 0, axis);
      if (legacy_) {
        K = prod_range(x.shape(), axis, r);
      } else {
        K = x.shape()[axis];
        inner = prod_range(x.shape(), axis + 1, r);
      }
    }
    DataType dt = x.dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    if (x.numel() == 0) return Status::ok();
    int th = ctx.threads();
    switch (dt) {
      case DataType::kFloat32: softmax_run<float>(kind_, x.data<float>(), y.data<float>(), outer, K, inner, th); break;
      case DataType::kFloat64: softmax_run<double>(kind_, x.data<double>(), y.data<double>(), outer, K, inner, th); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor f = to_float32(x);
        std::vector<float> out(static_cast<size_t>(x.numel()));
        softmax_run<float>(kind_, f.data<float>(), out.data(), outer, K, inner, th);
        from_float32(out.data(), y);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  Sm kind_;
  int64_t axis_;
  bool legacy_;
};

KernelFactory softmax_factory(Sm kind, bool legacy) {
  return [kind, legacy](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
    return std::unique_ptr<Kernel>(
        std::make_unique<SoftmaxKernel>(kind, info.node.attr_int("axis", legacy ? 1 : -1), legacy));
  };
}

// =====================================================================================
// Normalisations
// =====================================================================================

// Expands a scale/bias tensor that broadcasts against `xshape` into per-element values
// (as float or double). `span` is the number of trailing elements of x it may vary over:
// when its shape broadcasts within x's trailing `span` elements the result has `span`
// entries, otherwise x.numel() entries. Returns an empty vector with an error message
// when the shapes are incompatible.
template <typename C>
Status expand_param(const Tensor& p, const Shape& xshape, int axis, const std::string& where, const char* what,
                    std::vector<C>& out, bool& full) {
  int r = static_cast<int>(xshape.size());
  if (p.rank() > r)
    return invalid_argument(where + what + " of shape " + shape_to_string(p.shape()) + " has higher rank than input " +
                            shape_to_string(xshape));
  for (int i = 0; i < p.rank(); ++i) {
    int64_t pd = p.shape()[i], xd = xshape[r - p.rank() + i];
    if (pd != xd && pd != 1)
      return invalid_argument(where + what + " of shape " + shape_to_string(p.shape()) + " does not broadcast to " +
                              shape_to_string(xshape));
  }
  full = false;
  for (int i = 0; i < p.rank(); ++i)
    if (r - p.rank() + i < axis && p.shape()[i] != 1) full = true;
  Shape target;
  if (full) target = xshape;
  else target.assign(xshape.begin() + axis, xshape.end());
  Shape pshape = p.shape();
  while (pshape.size() > target.size()) pshape.erase(pshape.begin());  // leading 1s only, checked above
  Tensor pf = p.dtype() == DataType::kFloat64 ? p : to_float32(p);
  if (p.dtype() != DataType::kFloat64 && !dtype_is_float(p.dtype()))
    return unsupported(where + what + " has unsupported element type " + dtype_name(p.dtype()));
  int64_t n = shape_numel(target);
  out.resize(static_cast<size_t>(n));
  auto bst = broadcast_strides(pshape, target);
  int tr = static_cast<int>(target.size());
  std::vector<int64_t> idx(tr, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < tr; ++d) off += idx[d] * bst[d];
    out[i] = pf.dtype() == DataType::kFloat64 ? static_cast<C>(pf.data<double>()[off]) : static_cast<C>(pf.data<float>()[off]);
    for (int d = tr - 1; d >= 0; --d) {
      if (++idx[d] < target[d]) break;
      idx[d] = 0;
    }
  }
  return Status::ok();
}

DataType stash_dtype(int64_t stash) {
  switch (stash) {
    case 11: return DataType::kFloat64;
    case 10: return DataType::kFloat16;
    case 16: return DataType::kBFloat16;
    default: return DataType::kFloat32;
  }
}

// LayerNormalization (rms = false) and RMSNormalization (rms = true).
class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(bool rms, int64_t axis, float eps, int64_t stash) : rms_(rms), axis_(axis), eps_(eps), stash_(stash) {}

  template <typename C>
  Status run(KernelContext& ctx, const Tensor& x, const Tensor* scale, const Tensor* bias, int axis) const {
    const Shape& xs = x.shape();
    int r = x.rank();
    int64_t outer = prod_range(xs, 0, axis), D = prod_range(xs, axis, r);
    std::vector<C> sc, bi;
    bool sc_full = false, bi_full = false;
    if (scale) BH_RETURN_IF_ERROR(expand_param<C>(*scale, xs, axis, ctx.where(), "scale", sc, sc_full));
    if (bias) BH_RETURN_IF_ERROR(expand_param<C>(*bias, xs, axis, ctx.where(), "bias", bi, bi_full));
    bool direct = x.dtype() == (std::is_same_v<C, double> ? DataType::kFloat64 : DataType::kFloat32);
    if (std::is_same_v<C, double> && !direct) return internal_error(ctx.where() + "precision mismatch");
    Tensor xin = direct ? x : to_float32(x);
    const C* xp = xin.data<C>();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), xs));
    Shape ss(xs.begin(), xs.begin() + axis);
    ss.resize(r, 1);
    Tensor mean_t, inv_t;
    bool want_mean = !rms_ && ctx.output_wanted(1), want_inv = !rms_ && ctx.output_wanted(2);
    DataType sd = stash_dtype(stash_);
    if (want_mean) {
      BH_ASSIGN_OR_RETURN(mean_t, ctx.allocate_output(1, sd, ss));
    }
    if (want_inv) {
      BH_ASSIGN_OR_RETURN(inv_t, ctx.allocate_output(2, sd, ss));
    }
    std::vector<C> ybuf;
    C* yp;
    if (direct) {
      yp = y.data<C>();
    } else {
      ybuf.resize(static_cast<size_t>(x.numel()));
      yp = ybuf.data();
    }
    std::vector<C> means(static_cast<size_t>(outer)), invs(static_cast<size_t>(outer));
    C eps = static_cast<C>(eps_);
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1));
    parallel_for(ctx.threads(), outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const C* row = xp + o * D;
        C* out = yp + o * D;
        C mean = 0, inv;
        if (rms_) {
          C ss2 = 0;
          for (int64_t d = 0; d < D; ++d) ss2 += row[d] * row[d];
          inv = C(1) / std::sqrt(ss2 / static_cast<C>(D) + eps);
        } else {
          mean = row_sum(row, D) / static_cast<C>(D);
          C var = 0;
          for (int64_t d = 0; d < D; ++d) var += (row[d] - mean) * (row[d] - mean);
          inv = C(1) / std::sqrt(var / static_cast<C>(D) + eps);
        }
        means[o] = mean;
        invs[o] = inv;
        const C* s = sc.empty() ? nullptr : sc.data() + (sc_full ? o * D : 0);
        const C* bb = bi.empty() ? nullptr : bi.data() + (bi_full ? o * D : 0);
        if (s && bb) {
          for (int64_t d = 0; d < D; ++d) out[d] = (row[d] - mean) * inv * s[d] + bb[d];
        } else if (s) {
          for (int64_t d = 0; d < D; ++d) out[d] = (row[d] - mean) * inv * s[d];
        } else if (bb) {
          for (int64_t d = 0; d < D; ++d) out[d] = (row[d] - mean) * inv + bb[d];
        } else {
          for (int64_t d = 0; d < D; ++d) out[d] = (row[d] - mean) * inv;
        }
      }
    });
    if (!direct) {
      if constexpr (std::is_same_v<C, float>) from_float32(ybuf.data(), y);
    }
    auto store = [&](Tensor& t, const std::vector<C>& v) {
      if (t.dtype() == DataType::kFloat64) {
        for (int64_t i = 0; i < outer; ++i) t.data<double>()[i] = static_cast<double>(v[i]);
      } else {
        std::vector<float> f(v.begin(), v.end());
        from_float32(f.data(), t);
      }
    };
    if (want_mean) store(mean_t, means);
    if (want_inv) store(inv_t, invs);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
    const Tensor& x = *xp;
    int r = x.rank();
    if (r == 0) return invalid_argument(ctx.where() + "input must have rank >= 1");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_, r, ctx.where()));
    const Tensor* scale = ctx.input(1);
    const Tensor* bias = rms_ ? nullptr : ctx.input(2);
    DataType dt = x.dtype();
    if (dt == DataType::kFloat64) return run<double>(ctx, x, scale, bias, axis);
    if (dt == DataType::kFloat32 || is_half(dt)) return run<float>(ctx, x, scale, bias, axis);
    BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
  }

 private:
  bool rms_;
  int64_t axis_;
  float eps_;
  int64_t stash_;
};

// InstanceNormalization and GroupNormalization share this: x is [N, C, spatial...], each
// of the N * groups blocks of (C / groups) * S contiguous elements is normalised, then
// a per-channel (or per-group) scale and bias is applied.
class GroupNormKernel final : public Kernel {
 public:
  GroupNormKernel(bool instance, int64_t groups, float eps, bool per_group_params)
      : instance_(instance), groups_(groups), eps_(eps), per_group_params_(per_group_params) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
    BH_ASSIGN_OR_RETURN(const Tensor* scp, required_input(ctx, 1, "scale"));
    BH_ASSIGN_OR_RETURN(const Tensor* bp, required_input(ctx, 2, "B"));
    const Tensor& x = *xp;
    if (x.rank() < 2) return invalid_argument(ctx.where() + "input must have rank >= 2, got " + shape_to_string(x.shape()));
    DataType dt = x.dtype();
    if (!dtype_is_float(dt)) BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    int64_t N = x.shape()[0], C = x.shape()[1], S = prod_range(x.shape(), 2, x.rank());
    int64_t G = instance_ ? C : groups_;
    if (G <= 0 || C % G != 0)
      return invalid_argument(ctx.where() + "num_groups " + std::to_string(G) + " does not divide channels " + std::to_string(C));
    int64_t cpg = C / G;
    // Scale and bias: per channel [C], or per group [G] (GroupNormalization-18).
    auto load = [&](const Tensor* t, const char* what, std::vector<double>& v) -> Status {
      int64_t want_c = C;
      bool per_group = per_group_params_ && t->numel() == G && G != C;
      if (per_group) want_c = G;
      if (t->numel() != want_c && !(per_group_params_ && t->numel() == C))
        return invalid_argument(ctx.where() + what + " of shape " + shape_to_string(t->shape()) + " does not match " +
                                std::to_string(want_c) + (per_group ? " groups" : " channels"));
      if (!dtype_is_float(t->dtype())) return unsupported(ctx.where() + what + " has unsupported element type " + dtype_name(t->dtype()));
      Tensor f = t->dtype() == DataType::kFloat64 ? *t : to_float32(*t);
      v.resize(static_cast<size_t>(C));
      for (int64_t c = 0; c < C; ++c) {
        int64_t src = per_group ? c / cpg : c;
        v[c] = f.dtype() == DataType::kFloat64 ? f.data<double>()[src] : f.data<float>()[src];
      }
      return Status::ok();
    };
    std::vector<double> sc, bi;
    BH_RETURN_IF_ERROR(load(scp, "scale", sc));
    BH_RETURN_IF_ERROR(load(bp, "B", bi));
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    if (x.numel() == 0) return Status::ok();
    if (dt == DataType::kFloat64) {
      run<double>(x.data<double>(), y.data<double>(), N, G, cpg, S, sc, bi, ctx.threads());
    } else if (dt == DataType::kFloat32) {
      run<float>(x.data<float>(), y.data<float>(), N, G, cpg, S, sc, bi, ctx.threads());
    } else {
      Tensor f = to_float32(x);
      std::vector<float> out(static_cast<size_t>(x.numel()));
      run<float>(f.data<float>(), out.data(), N, G, cpg, S, sc, bi, ctx.threads());
      from_float32(out.data(), y);
    }
    return Status::ok();
  }

 private:
  template <typename T>
  void run(const T* x, T* y, int64_t N, int64_t G, int64_t cpg, int64_t S, const std::vector<double>& sc,
           const std::vector<double>& bi, int threads) const {
    int64_t blk = cpg * S;
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(blk, 1));
    parallel_for(threads, N * G, grain, [&](int64_t b, int64_t e) {
      for (int64_t ng = b; ng < e; ++ng) {
        const T* xb = x + ng * blk;
        T* yb = y + ng * blk;
        double sum = 0;
        for (int64_t i = 0; i < blk; ++i) sum += xb[i];
        double mean = blk ? sum / blk : 0;
        double var = 0;
        for (int64_t i = 0; i < blk; ++i) var += (xb[i] - mean) * (xb[i] - mean);
        var = blk ? var / blk : 0;
        double inv = 1.0 / std::sqrt(var + eps_);
        int64_t g = ng % G;
        for (int64_t cc = 0; cc < cpg; ++cc) {
          int64_t c = g * cpg + cc;
          T a = static_cast<T>(inv * sc[c]);
          T bb = static_cast<T>(bi[c] - mean * inv * sc[c]);
          const T* xs = xb + cc * S;
          T* ys = yb + cc * S;
          for (int64_t s = 0; s < S; ++s) ys[s] = xs[s] * a + bb;
        }
      }
    });
  }

  bool instance_;
  int64_t groups_;
  float eps_;
  bool per_group_params_;
};

class LpNormKernel final : public Kernel {
 public:
  LpNormKernel(int64_t axis, int64_t p) : axis_(axis), p_(p) {}

  template <typename T>
  void run(const T* x, T* y, int64_t outer, int64_t K, int64_t inner) const {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* xs = x + o * K * inner + i;
        T* ys = y + o * K * inner + i;
        T n = 0;
        for (int64_t k = 0; k < K; ++k) n += p_ == 1 ? std::abs(xs[k * inner]) : xs[k * inner] * xs[k * inner];
        if (p_ == 2) n = std::sqrt(n);
        // A zero norm leaves the (all-zero) slice at zero rather than 0/0.
        T inv = n == T(0) ? T(0) : T(1) / n;
        for (int64_t k = 0; k < K; ++k) ys[k * inner] = xs[k * inner] * inv;
      }
  }

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "input"));
    const Tensor& x = *xp;
    if (p_ != 1 && p_ != 2) return invalid_argument(ctx.where() + "p must be 1 or 2, got " + std::to_string(p_));
    int r = x.rank();
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_, r, ctx.where()));
    int64_t outer = r ? prod_range(x.shape(), 0, axis) : 1, K = r ? x.shape()[axis] : 1,
            inner = r ? prod_range(x.shape(), axis + 1, r) : 1;
    DataType dt = x.dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    if (x.numel() == 0) return Status::ok();
    switch (dt) {
      case DataType::kFloat32: run<float>(x.data<float>(), y.data<float>(), outer, K, inner); break;
      case DataType::kFloat64: run<double>(x.data<double>(), y.data<double>(), outer, K, inner); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor f = to_float32(x);
        std::vector<float> out(static_cast<size_t>(x.numel()));
        run<float>(f.data<float>(), out.data(), outer, K, inner);
        from_float32(out.data(), y);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  int64_t axis_;
  int64_t p_;
};

// MeanVarianceNormalization: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over `axes`.
class MvnKernel final : public Kernel {
 public:
  explicit MvnKernel(std::vector<int64_t> axes) : axes_(std::move(axes)) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
    const Tensor& x = *xp;
    int r = x.rank();
    DataType dt = x.dtype();
    if (!dtype_is_float(dt)) BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    std::vector<bool> red(r, false);
    for (int64_t a : axes_) {
      BH_ASSIGN_OR_RETURN(int ax, normalize_axis(a, r, ctx.where()));
      if (r) red[ax] = true;
    }
    // Output-group strides: reduced dims contribute nothing.
    Shape gshape(r);
    for (int i = 0; i < r; ++i) gshape[i] = red[i] ? 1 : x.shape()[i];
    auto gst = strides_of(gshape);
    int64_t ng = shape_numel(gshape), n = x.numel();
    Tensor xf = dt == DataType::kFloat64 ? x : to_float32(x);
    auto val = [&](int64_t i) -> double {
      return xf.dtype() == DataType::kFloat64 ? xf.data<double>()[i] : static_cast<double>(xf.data<float>()[i]);
    };
    std::vector<int64_t> gid(static_cast<size_t>(n));
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t g = 0;
      for (int d = 0; d < r; ++d)
        if (!red[d]) g += idx[d] * gst[d];
      gid[i] = g;
      for (int d = r - 1; d >= 0; --d) {
        if (++idx[d] < x.shape()[d]) break;
        idx[d] = 0;
      }
    }
    std::vector<double> s1(static_cast<size_t>(ng), 0), s2(static_cast<size_t>(ng), 0), cnt(static_cast<size_t>(ng), 0);
    for (int64_t i = 0; i < n; ++i) {
      double v = val(i);
      s1[gid[i]] += v;
      s2[gid[i]] += v * v;
      cnt[gid[i]] += 1;
    }
    for (int64_t g = 0; g < ng; ++g) {
      double m = cnt[g] ? s1[g] / cnt[g] : 0;
      double sd = std::sqrt(std::max(0.0, (cnt[g] ? s2[g] / cnt[g] : 0) - m * m));
      s1[g] = m;
      s2[g] = 1.0 / (sd + 1e-9);
    }
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    if (dt == DataType::kFloat64) {
      for (int64_t i = 0; i < n; ++i) y.data<double>()[i] = (val(i) - s1[gid[i]]) * s2[gid[i]];
    } else {
      std::vector<float> out(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((val(i) - s1[gid[i]]) * s2[gid[i]]);
      from_float32(out.data(), y);
    }
    return Status::ok();
  }

 private:
  std::vector<int64_t> axes_;
};

class LrnKernel final : public Kernel {
 public:
  LrnKernel(float alpha, float beta, float bias, int64_t size) : alpha_(alpha), beta_(beta), bias_(bias), size_(size) {}

  // y = x / (bias + alpha / size * (sum of x^2 over the channel window))^beta, a channel
  // row at a time: the window's squares are summed into a row of the spatial size, so
  // every inner loop runs along contiguous memory and vectorises; beta 0.75 (AlexNet,
  // GoogLeNet, ZFNet), 0.5 and 1 need no pow. Rows are spread over the run's threads.
  template <typename T>
  void run(const T* x, T* y, int64_t N, int64_t C, int64_t S, int threads) const {
    const int64_t lo = (size_ - 1) / 2, hi = size_ - 1 - lo;  // floor / ceil of (size-1)/2
    const T a = static_cast<T>(static_cast<double>(alpha_) / static_cast<double>(size_));
    const T bias = static_cast<T>(bias_), beta = static_cast<T>(beta_);
    const int kind = beta_ == 0.75f ? 0 : beta_ == 0.5f ? 1 : beta_ == 1.0f ? 2 : 3;
    parallel_for(threads, N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(S, 1)), [&](int64_t r0, int64_t r1) {
      std::vector<T> acc(static_cast<size_t>(S));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / C, c = r % C;
        const int64_t c0 = std::max<int64_t>(0, c - lo), c1 = std::min<int64_t>(C - 1, c + hi);
        std::fill(acc.begin(), acc.end(), T(0));
        for (int64_t cc = c0; cc <= c1; ++cc) {
          const T* xr = x + (n * C + cc) * S;
          for (int64_t s = 0; s < S; ++s) acc[s] += xr[s] * xr[s];
        }
        const T* xr = x + r * S;
        T* yr = y + r * S;
        switch (kind) {
          case 0:
            for (int64_t s = 0; s < S; ++s) {
              T t = bias + a * acc[s], q = std::sqrt(t);
              yr[s] = xr[s] / (q * std::sqrt(q));
            }
            break;
          case 1:
            for (int64_t s = 0; s < S; ++s) yr[s] = xr[s] / std::sqrt(bias + a * acc[s]);
            break;
          case 2:
            for (int64_t s = 0; s < S; ++s) yr[s] = xr[s] / (bias + a * acc[s]);
            break;
          default:
            for (int64_t s = 0; s < S; ++s) yr[s] = xr[s] / std::pow(bias + a * acc[s], beta);
        }
      }
    });
  }

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
    const Tensor& x = *xp;
    if (x.rank() < 2) return invalid_argument(ctx.where() + "input must have rank >= 2, got " + shape_to_string(x.shape()));
    if (size_ <= 0) return invalid_argument(ctx.where() + "size must be positive");
    int64_t N = x.shape()[0], C = x.shape()[1], S = prod_range(x.shape(), 2, x.rank());
    DataType dt = x.dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    if (x.numel() == 0) return Status::ok();
    switch (dt) {
      case DataType::kFloat32: run<float>(x.data<float>(), y.data<float>(), N, C, S, ctx.threads()); break;
      case DataType::kFloat64: run<double>(x.data<double>(), y.data<double>(), N, C, S, ctx.threads()); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor f = to_float32(x);
        std::vector<float> out(static_cast<size_t>(x.numel()));
        run<float>(f.data<float>(), out.data(), N, C, S, ctx.threads());
        from_float32(out.data(), y);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  float alpha_, beta_, bias_;
  int64_t size_;
};

}  // namespace

void register_reduction_kernels(KernelTable& t) {
  struct R {
    const char* name;
    Red op;
    int input_since;
  };
  const R reds[] = {
      {"ReduceSum", Red::kSum, 13},        {"ReduceMean", Red::kMean, 18},     {"ReduceMax", Red::kMax, 18},
      {"ReduceMin", Red::kMin, 18},        {"ReduceProd", Red::kProd, 18},     {"ReduceL1", Red::kL1, 18},
      {"ReduceL2", Red::kL2, 18},          {"ReduceLogSum", Red::kLogSum, 18}, {"ReduceLogSumExp", Red::kLogSumExp, 18},
      {"ReduceSumSquare", Red::kSumSquare, 18},
  };
  for (const R& r : reds) {
    t.add(r.name, 1, reduce_factory(r.op, false));
    t.add(r.name, r.input_since, reduce_factory(r.op, true));
  }
  // ReduceMax/ReduceMin-20 add bool inputs; same kernel.
  t.add("ReduceMax", 20, reduce_factory(Red::kMax, true));
  t.add("ReduceMin", 20, reduce_factory(Red::kMin, true));

  t.add("ArgMax", 1, arg_factory(true));
  t.add("ArgMin", 1, arg_factory(false));

  t.add("Softmax", 1, softmax_factory(Sm::kSoftmax, true));
  t.add("Softmax", 13, softmax_factory(Sm::kSoftmax, false));
  t.add("LogSoftmax", 1, softmax_factory(Sm::kLogSoftmax, true));
  t.add("LogSoftmax", 13, softmax_factory(Sm::kLogSoftmax, false));
  t.add("Hardmax", 1, softmax_factory(Sm::kHardmax, true));
  t.add("Hardmax", 13, softmax_factory(Sm::kHardmax, false));

  t.add("LayerNormalization", 17, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
    const ir::Node& n = info.node;
    return std::unique_ptr<Kernel>(std::make_unique<LayerNormKernel>(false, n.attr_int("axis", -1),
                                                                     n.attr_float("epsilon", 1e-5f),
                                                                     n.attr_int("stash_type", 1)));
  });
  t.add("RMSNormalization", 23, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
    const ir::Node& n = info.node;
    return std::unique_ptr<Kernel>(std::make_unique<LayerNormKernel>(true, n.attr_int("axis", -1),
                                                                     n.attr_float("epsilon", 1e-5f),
                                                                     n.attr_int("stash_type", 1)));
  });
  auto group_norm = [](bool per_group) {
    return [per_group](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      const ir::Node& n = info.node;
      if (!n.has_attr("num_groups")) return invalid_argument(info.where() + "missing required attribute num_groups");
      BH_RETURN_IF_ERROR(check_input_types(info, {0, 1, 2}, kFloatTypes));
      return std::unique_ptr<Kernel>(std::make_unique<GroupNormKernel>(false, n.attr_int("num_groups", 1),
                                                                       n.attr_float("epsilon", 1e-5f), per_group));
    };
  };
  t.add("GroupNormalization", 18, group_norm(true));
  t.add("GroupNormalization", 21, group_norm(false));
  t.add("InstanceNormalization", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_types(info, {0, 1, 2}, kFloatTypes));
    return std::unique_ptr<Kernel>(
        std::make_unique<GroupNormKernel>(true, 0, info.node.attr_float("epsilon", 1e-5f), false));
  });
  t.add("LpNormalization", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
    return std::unique_ptr<Kernel>(
        std::make_unique<LpNormKernel>(info.node.attr_int("axis", -1), info.node.attr_int("p", 2)));
  });
  t.add("MeanVarianceNormalization", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
    return std::unique_ptr<Kernel>(std::make_unique<MvnKernel>(info.node.attr_ints("axes", {0, 2, 3})));
  });
  t.add("LRN", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Node& n = info.node;
    if (!n.has_attr("size")) return invalid_argument(info.where() + "missing required attribute size");
    BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
    return std::unique_ptr<Kernel>(std::make_unique<LrnKernel>(n.attr_float("alpha", 1e-4f), n.attr_float("beta", 0.75f),
                                                               n.attr_float("bias", 1.0f), n.attr_int("size", 1)));
  });
}

}  // namespace bulkhead::cpu
