// Broadcasting elementwise kernels: arithmetic (Add Sub Mul Div Pow Mod), bitwise
// (BitShift, BitwiseAnd/Or/Xor), comparisons, logic (And Or Xor), PRelu, the variadic
// Max Min Mean Sum, and Where.
//
// Broadcasting engine: the output shape and each input's broadcast strides are reduced
// to a short list of coalesced dimensions (size-1 dims dropped, neighbours merged when
// every input walks them contiguously or not at all). The innermost coalesced dimension
// is the row: each input walks it with stride 1 or 0. Contiguous same-shape inputs become
// one row, scalars a stride-0 row, and [N,C,H,W] + [C,1,1] becomes rows of H*W with the
// channel value held fixed. The flat output range is split across threads; each chunk
// starts mid-row where needed and walks the outer dimensions with an odometer.
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/elementwise_dispatch.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu::ew {

Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where);
void register_binary_kernels(KernelTable& t);

namespace {

bool in_set(unsigned set, DataType dt) {
  switch (dt) {
    case DataType::kFloat32: return set & kF32;
    case DataType::kFloat64: return set & kF64;
    case DataType::kInt8: return set & kI8;
    case DataType::kInt16: return set & kI16;
    case DataType::kInt32: return set & kI32;
    case DataType::kInt64: return set & kI64;
    case DataType::kUInt8: return set & kU8;
    case DataType::kUInt16: return set & kU16;
    case DataType::kUInt32: return set & kU32;
    case DataType::kUInt64: return set & kU64;
    case DataType::kBool: return set & kBoolT;
    case DataType::kString: return set & kStr;
    default: return false;
  }
}

bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// A float32 copy of a float16/bfloat16 tensor, in scratch memory.
Result<Tensor> to_f32(KernelContext& ctx, const Tensor& t) {
  BH_ASSIGN_OR_RETURN(Tensor f, ctx.allocate_scratch(DataType::kFloat32, t.shape()));
  BH_RETURN_IF_ERROR(convert_into(t, f, ctx.threads(), ctx.where()));
  return f;
}

// ---------------------------------------------------------------------------------------
// Broadcast plan.

template <int K>
struct Plan {
  int64_t total = 0;
  int64_t inner = 1;
  std::vector<int64_t> dims;               // coalesced outer dims, outermost first
  std::array<std::vector<int64_t>, K> st;  // per input, strides of the outer dims
  std::array<int64_t, K> ist{};            // per input, stride of the row (0 or 1)
};

// `ins` must each broadcast to `out` (rank <= out rank, dims equal or 1).
template <int K>
Plan<K> make_plan(const Shape& out, const std::array<const Shape*, K>& ins) {
  Plan<K> p;
  p.total = shape_numel(out);
  std::array<std::vector<int64_t>, K> bs;
  for (int k = 0; k < K; ++k) bs[k] = broadcast_strides(*ins[k], out);
  std::vector<int64_t> d;
  std::array<std::vector<int64_t>, K> s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    if (!d.empty()) {
      bool merge = true;
      for (int k = 0; k < K; ++k)
        if (s[k].back() != bs[k][i] * out[i]) merge = false;
      if (merge) {
        d.back() *= out[i];
        for (int k = 0; k < K; ++k) s[k].back() = bs[k][i];
        continue;
      }
    }
    d.push_back(out[i]);
    for (int k = 0; k < K; ++k) s[k].push_back(bs[k][i]);
  }
  if (!d.empty()) {
    p.inner = d.back();
    d.pop_back();
    for (int k = 0; k < K; ++k) {
      p.ist[k] = s[k].back();
      s[k].pop_back();
    }
  }
  p.dims = std::move(d);
  p.st = std::move(s);
  return p;
}

// row(out_offset, in_offsets, n): n consecutive output elements; input k advances by
// p.ist[k] per element.
template <int K, class Row>
void run_plan(const Plan<K>& p, int threads, int64_t grain, Row&& row) {
  const int64_t inner = p.inner;
  const int R = static_cast<int>(p.dims.size());
  parallel_for(threads, p.total, grain, [&](int64_t b, int64_t e) {
    int64_t outer = b / inner, r = b % inner;
    std::array<int64_t, K> off{};
    std::vector<int64_t> idx(static_cast<size_t>(R), 0);
    for (int i = R - 1; i >= 0; --i) {
      idx[i] = outer % p.dims[i];
      outer /= p.dims[i];
      for (int k = 0; k < K; ++k) off[k] += idx[i] * p.st[k][i];
    }
    int64_t pos = b;
    while (pos < e) {
      int64_t n = std::min(inner - r, e - pos);
      std::array<int64_t, K> o;
      for (int k = 0; k < K; ++k) o[k] = off[k] + r * p.ist[k];
      row(pos, o, n);
      pos += n;
      r = 0;
      for (int i = R - 1; i >= 0; --i) {
        for (int k = 0; k < K; ++k) off[k] += p.st[k][i];
        if (++idx[i] < p.dims[i]) break;
        for (int k = 0; k < K; ++k) off[k] -= p.st[k][i] * p.dims[i];
        idx[i] = 0;
      }
    }
  });
}

// The row loop of a binary op, specialised on which inputs advance.
template <class A, class B, class O, class Op>
inline void binary_row(const A* a, const B* b, O* o, int64_t n, bool ia, bool ib, const Op& op) {
  if (ia && ib) {
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
  } else if (ia) {
    const B bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], bv);
  } else if (ib) {
    const A av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(av, b[i]);
  } else {
    const O v = op(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// out = op(a, b), a and b broadcast to out's shape. `out` may be `a` itself.
template <class A, class B, class O, class Op>
void apply_binary(const Shape& sa, const A* a, const Shape& sb, const B* b, const Shape& so, O* o, int threads,
                  int64_t grain, const Op& op) {
  Plan<2> p = make_plan<2>(so, {&sa, &sb});
  const bool ia = p.ist[0] != 0, ib = p.ist[1] != 0;
  run_plan<2>(p, threads, grain, [&](int64_t oo, const std::array<int64_t, 2>& in, int64_t n) {
    binary_row(a + in[0], b + in[1], o + oo, n, ia, ib, op);
  });
}

// ---------------------------------------------------------------------------------------
// Operators. Each is a functor over one C++ type; `Set` lists the types it accepts,
// `kHalf` whether float16/bfloat16 inputs are computed in float32, `kBoolOut` whether
// the output is bool.

template <class T>
using Wide = std::conditional_t<std::is_integral_v<T>, std::make_unsigned_t<T>, T>;

// Wrapping integer arithmetic (no signed-overflow UB).
template <class T, class F>
inline T wrap(T a, T b, F f) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return f(a, b);
  }
}

struct AddOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> T operator()(T a, T b) const { return wrap(a, b, [](auto x, auto y) { return decltype(x)(x + y); }); }
};
struct SubOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> T operator()(T a, T b) const { return wrap(a, b, [](auto x, auto y) { return decltype(x)(x - y); }); }
};
struct MulOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> T operator()(T a, T b) const { return wrap(a, b, [](auto x, auto y) { return decltype(x)(x * y); }); }
};
struct DivOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Integer division truncates. x/0 has no value: it yields 0 rather than trapping.
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(a));
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
struct ModOp {
  static constexpr unsigned kSet = kNumeric;
  bool fmod = false;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        T r = static_cast<T>(a % b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      T r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
struct BitAndOp {
  static constexpr unsigned kSet = kInts;
  template <class T> T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitOrOp {
  static constexpr unsigned kSet = kInts;
  template <class T> T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitXorOp {
  static constexpr unsigned kSet = kInts;
  template <class T> T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
struct ShiftOp {
  static constexpr unsigned kSet = kUnsigned;
  bool left = true;
  template <class T> T operator()(T a, T b) const {
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    if (b >= bits) return T(0);
    return left ? static_cast<T>(a << b) : static_cast<T>(a >> b);
  }
};
struct MaxOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a) ? a : (a >= b ? a : b);  // NaN propagates
    else return a >= b ? a : b;
  }
};
struct MinOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a) ? a : (a <= b ? a : b);
    else return a <= b ? a : b;
  }
};
struct PReluOp {
  static constexpr unsigned kSet = kNumeric & ~kUnsigned;
  template <class T> T operator()(T x, T s) const {
    if constexpr (std::is_integral_v<T>) return x < 0 ? wrap(x, s, [](auto p, auto q) { return decltype(p)(p * q); }) : x;
    else return x < 0 ? x * s : x;
  }
};

struct EqualOp {
  static constexpr unsigned kSet = kNumeric | kBoolT | kStr;
  template <class T> uint8_t operator()(const T& a, const T& b) const { return a == b; }
};
struct LessOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> uint8_t operator()(T a, T b) const { return a < b; }
};
struct GreaterOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> uint8_t operator()(T a, T b) const { return a > b; }
};
struct LessEqOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> uint8_t operator()(T a, T b) const { return a <= b; }
};
struct GreaterEqOp {
  static constexpr unsigned kSet = kNumeric;
  template <class T> uint8_t operator()(T a, T b) const { return a >= b; }
};
struct AndOp {
  static constexpr unsigned kSet = kBoolT;
  template <class T> T operator()(T a, T b) const { return static_cast<T>((a != 0) & (b != 0)); }
};
struct OrOp {
  static constexpr unsigned kSet = kBoolT;
  template <class T> T operator()(T a, T b) const { return static_cast<T>((a != 0) | (b != 0)); }
};
struct XorOp {
  static constexpr unsigned kSet = kBoolT;
  template <class T> T operator()(T a, T b) const { return static_cast<T>((a != 0) ^ (b != 0)); }
};

template <class Op> constexpr bool kBoolOut = false;
template <> constexpr bool kBoolOut<EqualOp> = true;
template <> constexpr bool kBoolOut<LessOp> = true;
template <> constexpr bool kBoolOut<GreaterOp> = true;
template <> constexpr bool kBoolOut<LessEqOp> = true;
template <> constexpr bool kBoolOut<GreaterEqOp> = true;

template <class Op> constexpr int64_t kGrainOf = 1 << 14;
template <> constexpr int64_t kGrainOf<DivOp> = 1 << 12;
template <> constexpr int64_t kGrainOf<ModOp> = 1 << 11;

// ---------------------------------------------------------------------------------------
// Shapes.

// Output shape of a two-input node; legacy (opset < 7) nodes broadcast B onto A only when
// broadcast=1, aligned at `axis` (or at the trailing dims), and otherwise need equal shapes.
struct BinaryShapes {
  Shape a, b, out;
};

Result<BinaryShapes> binary_shapes(const ir::Node& node, const Tensor& a, const Tensor& b, const std::string& where) {
  BinaryShapes s{a.shape(), b.shape(), {}};
  if (node.op_type == "PRelu") {
    // Before opset 7 a 1-D slope of length C applied per channel (axis 1), as PyTorch
    // exported it; from 7 on the slope broadcasts numpy-style onto X.
    if (node.opset > 0 && node.opset < 7 && b.rank() == 1 && a.rank() >= 2 && b.dim(0) == a.dim(1) && b.dim(0) != 1) {
      s.b.assign(static_cast<size_t>(a.rank() - 1), 1);
      s.b[0] = b.dim(0);
    }
    BH_ASSIGN_OR_RETURN(s.out, broadcast_shapes(a.shape(), s.b, where));
    return s;
  }
  if (node.opset > 0 && node.opset < 7) {
    if (node.attr_int("broadcast", 0) == 0) {
      if (a.shape() != b.shape())
        return invalid_argument(where + "input shapes " + shape_to_string(a.shape()) + " and " +
                                shape_to_string(b.shape()) + " differ and broadcast is not set");
      s.out = a.shape();
      return s;
    }
    const int ra = a.rank(), rb = b.rank();
    if (rb > ra) return invalid_argument(where + "B has higher rank than A with legacy broadcast");
    if (node.has_attr("axis")) {
      int64_t axis = node.attr_int("axis", 0);
      if (axis < 0) axis += ra;
      if (axis < 0 || axis > ra - rb)  // (axis + rb would overflow for an axis near INT64_MAX)
        return invalid_argument(where + "axis " + std::to_string(node.attr_int("axis", 0)) + " does not fit B of rank " +
                                std::to_string(rb) + " into A of rank " + std::to_string(ra));
      Shape nb(static_cast<size_t>(ra), 1);
      for (int i = 0; i < rb; ++i) nb[static_cast<size_t>(axis + i)] = b.shape()[static_cast<size_t>(i)];
      s.b = nb;
    }
    for (size_t i = 0; i < s.b.size(); ++i) {
      int64_t db = s.b[s.b.size() - 1 - i], da = s.a[s.a.size() - 1 - i];
      if (db != 1 && db != da)
        return invalid_argument(where + "B " + shape_to_string(b.shape()) + " cannot be broadcast onto A " +
                                shape_to_string(a.shape()));
    }
    s.out = a.shape();
    return s;
  }
  BH_ASSIGN_OR_RETURN(s.out, broadcast_shapes(a.shape(), b.shape(), where));
  return s;
}

// ---------------------------------------------------------------------------------------
// Generic binary kernel.

template <class Op>
class BinaryKernel final : public Kernel {
 public:
  BinaryKernel(const ir::Node& node, Op op) : node_(node), op_(op) {}

  Status compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    if (!a || !b) return invalid_argument(ctx.where() + "expects two tensor inputs");
    if (a->dtype() != b->dtype())
      return invalid_argument(ctx.where() + "input types differ: " + dtype_name(a->dtype()) + " and " +
                              dtype_name(b->dtype()));
    BH_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(node_, *a, *b, ctx.where()));
    const DataType dt = a->dtype();
    const DataType out_dt = kBoolOut<Op> ? DataType::kBool : dt;
    if constexpr ((Op::kSet & kF32) != 0) {
      if (is_half(dt)) return compute_half(ctx, *a, *b, s, out_dt);
    }
    return dispatch<Op::kSet>(dt, ctx.where(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, out_dt, s.out));
      if (out.numel() == 0) return Status::ok();
      if constexpr (std::is_same_v<T, std::string>) {
        apply_binary(s.a, a->strings(), s.b, b->strings(), s.out, out.data<uint8_t>(), ctx.threads(), 1 << 10, op_);
      } else if constexpr (kBoolOut<Op>) {
        apply_binary(s.a, a->data<T>(), s.b, b->data<T>(), s.out, out.data<uint8_t>(), ctx.threads(), kGrainOf<Op>, op_);
      } else {
        apply_binary(s.a, a->data<T>(), s.b, b->data<T>(), s.out, out.data<T>(), ctx.threads(), kGrainOf<Op>, op_);
      }
      return Status::ok();
    });
  }

  Status compute_half(KernelContext& ctx, const Tensor& a, const Tensor& b, const BinaryShapes& s, DataType out_dt) const {
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, out_dt, s.out));
    if (out.numel() == 0) return Status::ok();
    BH_ASSIGN_OR_RETURN(Tensor fa, to_f32(ctx, a));
    BH_ASSIGN_OR_RETURN(Tensor fb, to_f32(ctx, b));
    if constexpr (kBoolOut<Op>) {
      apply_binary(s.a, fa.data<float>(), s.b, fb.data<float>(), s.out, out.data<uint8_t>(), ctx.threads(),
                   kGrainOf<Op>, op_);
    } else {
      BH_ASSIGN_OR_RETURN(Tensor fo, ctx.allocate_scratch(DataType::kFloat32, s.out));
      apply_binary(s.a, fa.data<float>(), s.b, fb.data<float>(), s.out, fo.data<float>(), ctx.threads(),
                   kGrainOf<Op>, op_);
      BH_RETURN_IF_ERROR(convert_into(fo, out, ctx.threads(), ctx.where()));
    }
    return Status::ok();
  }

 private:
  ir::Node node_;
  Op op_;
};

template <class Op>
KernelFactory binary_factory(Op op = Op{}) {
  return [op](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() != 2)
      return invalid_model(info.where() + "expects 2 inputs, got " + std::to_string(info.node.inputs.size()));
    BH_RETURN_IF_ERROR(check_input_types(info, {0, 1}, {Op::kSet, (Op::kSet & kF32) != 0}));
    return std::unique_ptr<Kernel>(new BinaryKernel<Op>(info.node, op));
  };
}

// ---------------------------------------------------------------------------------------
// Pow: base and exponent may have different types; the output has the base's type.

int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  uint64_t ue = static_cast<uint64_t>(e);
  while (ue) {
    if (ue & 1) r *= b;
    b *= b;
    ue >>= 1;
  }
  return static_cast<int64_t>(r);
}

bool pow_base_ok(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         t == DataType::kInt32 || t == DataType::kInt64;
}
bool pow_exp_ok(DataType t) { return dtype_is_float(t) || dtype_is_integer(t); }

class PowKernel final : public Kernel {
 public:
  explicit PowKernel(const ir::Node& node) : node_(node) {}
  Status compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    if (!a || !b) return invalid_argument(ctx.where() + "expects two tensor inputs");
    if (!pow_base_ok(a->dtype()) || !pow_exp_ok(b->dtype()))
      return unsupported(ctx.where() + "unsupported element types " + dtype_name(a->dtype()) + " ^ " +
                         dtype_name(b->dtype()));
    BH_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(node_, *a, *b, ctx.where()));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, a->dtype(), s.out));
    if (out.numel() == 0) return Status::ok();
    const int th = ctx.threads();
    if (a->dtype() == DataType::kFloat32 && b->dtype() == DataType::kFloat32) {
      // Common constant exponents as vectorisable loops with pow's exact results.
      if (b->numel() == 1) {
        const float y = b->data<float>()[0];
        if (y == 2.0f) {
          apply_binary(s.a, a->data<float>(), s.b, b->data<float>(), s.out, out.data<float>(), th, 1 << 14,
                       [](float x, float) { return x * x; });
          return Status::ok();
        }
        if (y == 0.5f) {
          apply_binary(s.a, a->data<float>(), s.b, b->data<float>(), s.out, out.data<float>(), th, 1 << 14,
                       [](float x, float) {
                         return x == -std::numeric_limits<float>::infinity() ? std::numeric_limits<float>::infinity()
                                                                              : std::sqrt(x) + 0.0f;
                       });
          return Status::ok();
        }
      }
      apply_binary(s.a, a->data<float>(), s.b, b->data<float>(), s.out, out.data<float>(), th, 1 << 11,
                   [](float x, float y) { return y == 2.0f ? x * x : std::pow(x, y); });
      return Status::ok();
    }
    if (a->dtype() == DataType::kFloat64 && b->dtype() == DataType::kFloat64) {
      apply_binary(s.a, a->data<double>(), s.b, b->data<double>(), s.out, out.data<double>(), th, 1 << 11,
                   [](double x, double y) { return std::pow(x, y); });
      return Status::ok();
    }
    // Mixed types: integers in int64, everything else in float64, then back to the base type.
    const bool ints = dtype_is_integer(a->dtype()) && dtype_is_integer(b->dtype());
    const DataType wide = ints ? DataType::kInt64 : DataType::kFloat64;
    auto widen = [&](const Tensor& t) -> Result<Tensor> {
      if (t.dtype() == wide) return t;
      BH_ASSIGN_OR_RETURN(Tensor w, ctx.allocate_scratch(wide, t.shape()));
      BH_RETURN_IF_ERROR(convert_into(t, w, th, ctx.where()));
      return w;
    };
    BH_ASSIGN_OR_RETURN(Tensor wa, widen(*a));
    BH_ASSIGN_OR_RETURN(Tensor wb, widen(*b));
    Tensor wo = out;
    if (out.dtype() != wide) {
      BH_ASSIGN_OR_RETURN(wo, ctx.allocate_scratch(wide, s.out));
    }
    if (ints) {
      apply_binary(s.a, wa.data<int64_t>(), s.b, wb.data<int64_t>(), s.out, wo.data<int64_t>(), th, 1 << 11,
                   [](int64_t x, int64_t y) { return ipow(x, y); });
    } else {
      apply_binary(s.a, wa.data<double>(), s.b, wb.data<double>(), s.out, wo.data<double>(), th, 1 << 11,
                   [](double x, double y) { return std::pow(x, y); });
    }
    if (out.dtype() != wide) BH_RETURN_IF_ERROR(convert_into(wo, out, th, ctx.where()));
    return Status::ok();
  }

 private:
  ir::Node node_;
};

// ---------------------------------------------------------------------------------------
// Variadic Max / Min / Sum / Mean with multidirectional broadcasting.

template <class Op>
class VariadicKernel final : public Kernel {
 public:
  explicit VariadicKernel(bool mean) : mean_(mean) {}

  Status compute(KernelContext& ctx) const override {
    const int n = ctx.num_inputs();
    std::vector<const Tensor*> in;
    for (int i = 0; i < n; ++i) {
      const Tensor* t = ctx.input(i);
      if (!t) return invalid_argument(ctx.where() + "input " + std::to_string(i) + " is missing");
      if (!in.empty() && t->dtype() != in[0]->dtype())
        return invalid_argument(ctx.where() + "input " + std::to_string(i) + " has type " + dtype_name(t->dtype()) +
                                ", expected " + dtype_name(in[0]->dtype()));
      in.push_back(t);
    }
    if (in.empty()) return invalid_argument(ctx.where() + "needs at least one input");
    const DataType dt = in[0]->dtype();
    if (in.size() == 1 && (is_half(dt) || in_set(Op::kSet, dt))) return ctx.set_output(0, Value(*in[0]));
    Shape out_shape = in[0]->shape();
    for (size_t i = 1; i < in.size(); ++i) {
      BH_ASSIGN_OR_RETURN(out_shape, broadcast_shapes(out_shape, in[i]->shape(), ctx.where()));
    }
    if (is_half(dt)) {
      BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, out_shape));
      if (out.numel() == 0) return Status::ok();
      std::vector<Tensor> f;
      for (const Tensor* t : in) {
        BH_ASSIGN_OR_RETURN(Tensor ft, to_f32(ctx, *t));
        f.push_back(ft);
      }
      BH_ASSIGN_OR_RETURN(Tensor fo, ctx.allocate_scratch(DataType::kFloat32, out_shape));
      fold<float>(ctx, f, fo);
      return convert_into(fo, out, ctx.threads(), ctx.where());
    }
    return dispatch<Op::kSet>(dt, ctx.where(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, out_shape));
      if (out.numel() == 0) return Status::ok();
      std::vector<Tensor> ts;
      for (const Tensor* t : in) ts.push_back(*t);
      fold<T>(ctx, ts, out);
      return Status::ok();
    });
  }

 private:
  template <class T>
  void fold(KernelContext& ctx, const std::vector<Tensor>& in, const Tensor& out) const {
    const Shape& so = out.shape();
    T* o = out.data<T>();
    const int th = ctx.threads();
    Op op;
    if (in.size() == 1) {
      apply_binary(in[0].shape(), in[0].data<T>(), in[0].shape(), in[0].data<T>(), so, o, th, 1 << 14,
                   [](T x, T) { return x; });
    } else {
      apply_binary(in[0].shape(), in[0].data<T>(), in[1].shape(), in[1].data<T>(), so, o, th, 1 << 14, op);
      for (size_t i = 2; i < in.size(); ++i)
        apply_binary(so, static_cast<const T*>(o), in[i].shape(), in[i].data<T>(), so, o, th, 1 << 14, op);
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (mean_) {
        const T inv = T(1) / static_cast<T>(in.size());
        parallel_for(th, out.numel(), 1 << 15, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) o[i] *= inv;
        });
      }
    }
  }
  bool mean_;
};

// ---------------------------------------------------------------------------------------
// Where(condition, X, Y).

template <class T>
void where_typed(const Tensor& c, const Tensor& x, const Tensor& y, const Tensor& out, const T* xp, const T* yp, T* op,
                 int threads) {
  Plan<3> p = make_plan<3>(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
  const uint8_t* cp = c.data<uint8_t>();
  const int64_t ic = p.ist[0], ix = p.ist[1], iy = p.ist[2];
  run_plan<3>(p, threads, 1 << 14, [&](int64_t oo, const std::array<int64_t, 3>& in, int64_t n) {
    const uint8_t* cc = cp + in[0];
    const T* xx = xp + in[1];
    const T* yy = yp + in[2];
    T* o = op + oo;
    if (ic == 1 && ix == 1 && iy == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = cc[i] ? xx[i] : yy[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = cc[i * ic] ? xx[i * ix] : yy[i * iy];
    }
  });
}

Status where_compute(KernelContext& ctx) {
  const Tensor* c = ctx.input(0);
  const Tensor* x = ctx.input(1);
  const Tensor* y = ctx.input(2);
  if (!c || !x || !y) return invalid_argument(ctx.where() + "expects three tensor inputs");
  if (c->dtype() != DataType::kBool)
    return invalid_argument(ctx.where() + "condition must be bool, got " + dtype_name(c->dtype()));
  if (x->dtype() != y->dtype())
    return invalid_argument(ctx.where() + "X and Y types differ: " + dtype_name(x->dtype()) + " and " +
                            dtype_name(y->dtype()));
  BH_ASSIGN_OR_RETURN(Shape s1, broadcast_shapes(c->shape(), x->shape(), ctx.where()));
  BH_ASSIGN_OR_RETURN(Shape so, broadcast_shapes(s1, y->shape(), ctx.where()));
  const DataType dt = x->dtype();
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, so));
  if (out.numel() == 0) return Status::ok();
  const int th = ctx.threads();
  if (dt == DataType::kString) {
    where_typed<std::string>(*c, *x, *y, out, x->strings(), y->strings(), out.strings(), 1);
    return Status::ok();
  }
  switch (dtype_size(dt)) {
    case 1: where_typed<uint8_t>(*c, *x, *y, out, x->data<uint8_t>(), y->data<uint8_t>(), out.data<uint8_t>(), th); break;
    case 2: where_typed<uint16_t>(*c, *x, *y, out, x->data<uint16_t>(), y->data<uint16_t>(), out.data<uint16_t>(), th); break;
    case 4: where_typed<uint32_t>(*c, *x, *y, out, x->data<uint32_t>(), y->data<uint32_t>(), out.data<uint32_t>(), th); break;
    case 8: where_typed<uint64_t>(*c, *x, *y, out, x->data<uint64_t>(), y->data<uint64_t>(), out.data<uint64_t>(), th); break;
    default: return unsupported(ctx.where() + "unsupported element type " + dtype_name(dt));
  }
  return Status::ok();
}

template <class Op>
KernelFactory variadic_factory(bool mean = false) {
  return [mean](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.empty()) return invalid_model(info.where() + "needs at least one input");
    for (size_t i = 0; i < info.node.inputs.size(); ++i) BH_RETURN_IF_ERROR(check_input_type(info, i, {Op::kSet, true}));
    return std::unique_ptr<Kernel>(new VariadicKernel<Op>(mean));
  };
}

struct SumOp {
  static constexpr unsigned kSet = kFloats;
  template <class T> T operator()(T a, T b) const { return a + b; }
};

}  // namespace

void register_binary_kernels(KernelTable& t) {
  t.add("Add", 1, binary_factory<AddOp>());
  t.add("Sub", 1, binary_factory<SubOp>());
  t.add("Mul", 1, binary_factory<MulOp>());
  t.add("Div", 1, binary_factory<DivOp>());
  t.add("Mod", 10, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    ModOp op;
    op.fmod = info.node.attr_int("fmod", 0) != 0;
    return binary_factory<ModOp>(op)(info);
  });
  t.add("Pow", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() != 2) return invalid_model(info.where() + "expects 2 inputs");
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {kF32 | kF64 | kI32 | kI64, true}));
    BH_RETURN_IF_ERROR(check_input_type(info, 1, {kNumeric, true}));
    return std::unique_ptr<Kernel>(new PowKernel(info.node));
  });
  t.add("BitShift", 11, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    std::string dir = info.node.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT")
      return invalid_model(info.where() + "attribute 'direction' must be LEFT or RIGHT, got '" + dir + "'");
    ShiftOp op;
    op.left = dir == "LEFT";
    return binary_factory<ShiftOp>(op)(info);
  });
  t.add("BitwiseAnd", 18, binary_factory<BitAndOp>());
  t.add("BitwiseOr", 18, binary_factory<BitOrOp>());
  t.add("BitwiseXor", 18, binary_factory<BitXorOp>());
  t.add("Equal", 1, binary_factory<EqualOp>());
  t.add("Less", 1, binary_factory<LessOp>());
  t.add("Greater", 1, binary_factory<GreaterOp>());
  t.add("LessOrEqual", 12, binary_factory<LessEqOp>());
  t.add("GreaterOrEqual", 12, binary_factory<GreaterEqOp>());
  t.add("And", 1, binary_factory<AndOp>());
  t.add("Or", 1, binary_factory<OrOp>());
  t.add("Xor", 1, binary_factory<XorOp>());
  t.add("PRelu", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() != 2) return invalid_model(info.where() + "expects 2 inputs");
    BH_RETURN_IF_ERROR(check_input_types(info, {0, 1}, {PReluOp::kSet, true}));
    return std::unique_ptr<Kernel>(new BinaryKernel<PReluOp>(info.node, PReluOp{}));
  });
  t.add("Max", 1, variadic_factory<MaxOp>());
  t.add("Min", 1, variadic_factory<MinOp>());
  t.add("Sum", 1, variadic_factory<SumOp>());
  t.add("Mean", 1, variadic_factory<SumOp>(true));
  t.add("Where", 9, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() != 3) return invalid_model(info.where() + "expects 3 inputs");
    return make_kernel(where_compute);
  });
}

}  // namespace bulkhead::cpu::ew
