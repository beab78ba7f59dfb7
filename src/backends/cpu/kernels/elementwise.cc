// Elementwise family: unary maths and activations, Clip, IsNaN/IsInf, Not/BitwiseNot
// (this file), broadcasting binary/variadic ops and Where (elementwise_binary.cc), Cast
// and CastLike (elementwise_cast.cc).
//
// float16/bfloat16 inputs of floating-point operators are computed in float32 and
// rounded back. float32 Exp/Sigmoid/Tanh/Swish/Gelu use vectorisable polynomial
// approximations (a few ulp), everything else the C library.
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/activation_rows.h"
#include "backends/cpu/kernels/elementwise_dispatch.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu {

namespace ew {
Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where);
void register_binary_kernels(KernelTable& t);
void register_cast_kernels(KernelTable& t);
}  // namespace ew

namespace {

using ew::convert_into;

using namespace ew;  // Tag, TypeSet, dispatch (elementwise_dispatch.h)

bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// ---------------------------------------------------------------------------------------
// Vectorisable float32 exp: Cody-Waite reduction to [-ln2/2, ln2/2], degree-6
// polynomial, scale by 2^k through the exponent bits. Max error ~2 ulp; overflow gives
// inf, results below 2^-126 are subnormal-accurate to an absolute 1e-45, NaN propagates.
inline float exp_f32(float x) {
  float xc = x > 88.75f ? 88.75f : (x < -104.0f ? -104.0f : x);
  xc = x == x ? xc : 0.0f;  // NaN: any finite k (the result is x), never a NaN cast to int
  float k = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^k as two factors so that k in [-150, 128] stays representable.
  int32_t ki = static_cast<int32_t>(k);
  int32_t k1 = ki >> 1, k2 = ki - k1;
  float s1 = std::bit_cast<float>((k1 + 127) << 23);
  float s2 = std::bit_cast<float>((k2 + 127) << 23);
  float y = p * s1 * s2;
  y = x > 88.72283935546875f ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)); small |x| by the odd Taylor series to
// keep relative accuracy near zero.
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float e = exp_f32(2.0f * (ax > 9.0f ? 9.0f : ax));
  float t = 1.0f - 2.0f / (e + 1.0f);
  float x2 = x * x;
  float small = ax * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * (-0.0539682540f + x2 * 0.0218694885f))));
  t = ax < 0.0625f ? small : t;
  t = std::copysign(t, x);
  return x != x ? x : t;
}

template <class T>
inline T t_exp(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}
template <class T>
inline T t_sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) return sigmoid_f32(x);
  else return T(1) / (T(1) + std::exp(-x));
}
template <class T>
inline T t_tanh(T x) {
  if constexpr (std::is_same_v<T, float>) return tanh_f32(x);
  else return std::tanh(x);
}

template <class T>
inline T softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// Wrapping negation for integers (no overflow UB).
template <class T>
inline T neg(T x) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
  else return -x;
}

// ---------------------------------------------------------------------------------------
// Operators: kSet = accepted types; operator()(T) -> T. Float ops also take
// float16/bfloat16 through float32.

#define BH_UNARY(Name, Set, Grain, ...)                        \
  struct Name {                                                \
    static constexpr unsigned kSet = Set;                      \
    static constexpr int64_t kGrain = Grain;                   \
    explicit Name(const ir::Node&) {}                          \
    template <class T>                                         \
    T operator()(T x) const { return __VA_ARGS__; }            \
  };

constexpr int64_t kCheap = 1 << 14, kDear = 1 << 11;

BH_UNARY(AbsOp, kNumeric, kCheap, std::is_signed_v<T> ? (x < T(0) ? neg(x) : x) : x)
BH_UNARY(NegOp, kFloats | kSigned, kCheap, neg(x))
BH_UNARY(SignOp, kNumeric, kCheap, x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(neg(T(1))) : x))
BH_UNARY(ReluOp, kFloats | kSigned, kCheap, x < T(0) ? T(0) : x)
BH_UNARY(ExpOp, kFloats, kDear, t_exp(x))
BH_UNARY(LogOp, kFloats, kDear, std::log(x))
BH_UNARY(SqrtOp, kFloats, kCheap, std::sqrt(x))
BH_UNARY(ReciprocalOp, kFloats, kCheap, T(1) / x)
BH_UNARY(SigmoidOp, kFloats, kDear, t_sigmoid(x))
BH_UNARY(TanhOp, kFloats, kDear, t_tanh(x))
BH_UNARY(ErfOp, kFloats, kDear, std::erf(x))
BH_UNARY(SoftplusOp, kFloats, kDear, softplus(x))
BH_UNARY(SoftsignOp, kFloats, kCheap, x / (T(1) + std::fabs(x)))
BH_UNARY(HardSwishOp, kFloats, kCheap, x * std::max(T(0), std::min(T(1), x * T(1.0 / 6.0) + T(0.5))))
BH_UNARY(MishOp, kFloats, kDear, x * std::tanh(softplus(x)))
BH_UNARY(FloorOp, kFloats, kCheap, std::floor(x))
BH_UNARY(CeilOp, kFloats, kCheap, std::ceil(x))
BH_UNARY(RoundOp, kFloats, kCheap, std::nearbyint(x))
BH_UNARY(SinOp, kFloats, kDear, std::sin(x))
BH_UNARY(CosOp, kFloats, kDear, std::cos(x))
BH_UNARY(TanOp, kFloats, kDear, std::tan(x))
BH_UNARY(AsinOp, kFloats, kDear, std::asin(x))
BH_UNARY(AcosOp, kFloats, kDear, std::acos(x))
BH_UNARY(AtanOp, kFloats, kDear, std::atan(x))
BH_UNARY(SinhOp, kFloats, kDear, std::sinh(x))
BH_UNARY(CoshOp, kFloats, kDear, std::cosh(x))
BH_UNARY(AsinhOp, kFloats, kDear, std::asinh(x))
BH_UNARY(AcoshOp, kFloats, kDear, std::acosh(x))
BH_UNARY(AtanhOp, kFloats, kDear, std::atanh(x))
BH_UNARY(BitwiseNotOp, kInts, kCheap, static_cast<T>(~x))
BH_UNARY(NotOp, kBoolT, kCheap, static_cast<T>(x == 0))
#undef BH_UNARY

struct LeakyReluOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kCheap;
  float alpha;
  explicit LeakyReluOp(const ir::Node& n) : alpha(n.attr_float("alpha", 0.01f)) {}
  template <class T> T operator()(T x) const { return x < T(0) ? T(alpha) * x : x; }
};
struct EluOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kDear;
  float alpha;
  explicit EluOp(const ir::Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class T> T operator()(T x) const { return x < T(0) ? T(alpha) * std::expm1(x) : x; }
};
struct SeluOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kDear;
  float alpha, gamma;
  explicit SeluOp(const ir::Node& n)
      : alpha(n.attr_float("alpha", 1.67326319217681884765625f)), gamma(n.attr_float("gamma", 1.05070102214813232421875f)) {}
  template <class T> T operator()(T x) const { return x <= T(0) ? T(gamma) * (T(alpha) * std::exp(x) - T(alpha)) : T(gamma) * x; }
};
struct CeluOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kDear;
  float alpha;
  explicit CeluOp(const ir::Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class T> T operator()(T x) const {
    return std::max(T(0), x) + std::min(T(0), T(alpha) * std::expm1(x / T(alpha)));
  }
};
struct HardSigmoidOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kCheap;
  float alpha, beta;
  explicit HardSigmoidOp(const ir::Node& n) : alpha(n.attr_float("alpha", 0.2f)), beta(n.attr_float("beta", 0.5f)) {}
  template <class T> T operator()(T x) const { return std::max(T(0), std::min(T(1), T(alpha) * x + T(beta))); }
};
struct ThresholdedReluOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kCheap;
  float alpha;
  explicit ThresholdedReluOp(const ir::Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class T> T operator()(T x) const { return x > T(alpha) ? x : T(0); }
};
struct SwishOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kDear;
  float alpha;
  explicit SwishOp(const ir::Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class T> T operator()(T x) const { return x * t_sigmoid(T(alpha) * x); }
};
struct GeluOp {
  static constexpr unsigned kSet = kFloats;
  static constexpr int64_t kGrain = kDear;
  bool tanh_approx;
  explicit GeluOp(const ir::Node& n) : tanh_approx(n.attr_string("approximate", "none") == "tanh") {}
  template <class T> T operator()(T x) const {
    if (tanh_approx) {
      const T k = T(0.79788456080286535588);  // sqrt(2/pi)
      return T(0.5) * x * (T(1) + t_tanh(k * (x + T(0.044715) * x * x * x)));
    }
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
struct ShrinkOp {
  static constexpr unsigned kSet = kNumeric;
  static constexpr int64_t kGrain = kCheap;
  float bias, lambd;
  explicit ShrinkOp(const ir::Node& n) : bias(n.attr_float("bias", 0.0f)), lambd(n.attr_float("lambd", 0.5f)) {}
  template <class T> T operator()(T x) const {
    using C = std::conditional_t<std::is_same_v<T, float>, float, double>;
    C v = static_cast<C>(x);
    if (v < -C(lambd)) return static_cast<T>(v + C(bias));
    if (v > C(lambd)) return static_cast<T>(v - C(bias));
    return T(0);
  }
};

// ---------------------------------------------------------------------------------------
// Kernels.

template <class Op>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(Op op) : op_(op) {}

  Status compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input 0");
    const DataType dt = x->dtype();
    if constexpr ((Op::kSet & kF32) != 0) {
      if (is_half(dt)) {
        BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, x->shape()));
        const int64_t n = out.numel();
        if (n == 0) return Status::ok();
        BH_ASSIGN_OR_RETURN(Tensor f, ctx.allocate_scratch(DataType::kFloat32, x->shape()));
        BH_RETURN_IF_ERROR(convert_into(*x, f, ctx.threads(), ctx.where()));
        float* p = f.data<float>();
        run<float>(ctx, p, p, n);
        return convert_into(f, out, ctx.threads(), ctx.where());
      }
    }
    return dispatch<Op::kSet>(dt, ctx.where(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, x->shape()));
      const int64_t n = out.numel();
      if (n == 0) return Status::ok();
      run<T>(ctx, x->data<T>(), out.data<T>(), n);
      return Status::ok();
    });
  }

 private:
  template <class T>
  void run(KernelContext& ctx, const T* in, T* out, int64_t n) const {
    const Op op = op_;
    parallel_for(ctx.threads(), n, Op::kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = op(in[i]);
    });
  }
  Op op_;
};

template <class Op>
KernelFactory unary_factory() {
  return [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.empty() || info.node.inputs[0].empty())
      return invalid_model(info.where() + "missing input 0");
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {Op::kSet, (Op::kSet & kF32) != 0}));
    return std::unique_ptr<Kernel>(new UnaryKernel<Op>(Op(info.node)));
  };
}

// IsNaN / IsInf: float -> bool.
class ClassifyKernel final : public Kernel {
 public:
  ClassifyKernel(bool nan, bool neg, bool pos) : nan_(nan), neg_(neg), pos_(pos) {}
  Status compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input 0");
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, DataType::kBool, x->shape()));
    const int64_t n = out.numel();
    if (n == 0) return Status::ok();
    uint8_t* o = out.data<uint8_t>();
    const bool nan = nan_, neg = neg_, pos = pos_;
    auto body = [&](auto get) {
      parallel_for(ctx.threads(), n, kCheap, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          auto v = get(i);
          o[i] = nan ? (v != v) : ((pos && v == std::numeric_limits<decltype(v)>::infinity()) ||
                                   (neg && v == -std::numeric_limits<decltype(v)>::infinity()));
        }
      });
    };
    switch (x->dtype()) {
      case DataType::kFloat32: { const float* p = x->data<float>(); body([p](int64_t i) { return p[i]; }); break; }
      case DataType::kFloat64: { const double* p = x->data<double>(); body([p](int64_t i) { return p[i]; }); break; }
      case DataType::kFloat16: { const uint16_t* p = x->data<uint16_t>(); body([p](int64_t i) { return half_to_float(p[i]); }); break; }
      case DataType::kBFloat16: { const uint16_t* p = x->data<uint16_t>(); body([p](int64_t i) { return bfloat16_to_float(p[i]); }); break; }
      default: return unsupported(ctx.where() + "unsupported element type " + dtype_name(x->dtype()));
    }
    return Status::ok();
  }

 private:
  bool nan_, neg_, pos_;
};

// Clip: bounds from attributes (opset < 11) or from optional scalar inputs (opset >= 11).
class ClipKernel final : public Kernel {
 public:
  ClipKernel(bool from_inputs, float amin, float amax) : from_inputs_(from_inputs), amin_(amin), amax_(amax) {}

  Status compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input 0");
    const Tensor* tmin = from_inputs_ ? ctx.input(1) : nullptr;
    const Tensor* tmax = from_inputs_ ? ctx.input(2) : nullptr;
    for (const Tensor* b : {tmin, tmax}) {
      if (!b) continue;
      if (b->numel() != 1)
        return invalid_argument(ctx.where() + "min/max must be scalars, got shape " + shape_to_string(b->shape()));
      if (b->dtype() != x->dtype())
        return invalid_argument(ctx.where() + "min/max type " + dtype_name(b->dtype()) + " differs from input type " +
                                dtype_name(x->dtype()));
    }
    const DataType dt = x->dtype();
    if (is_half(dt)) {
      auto h2f = [dt](const Tensor* t, float def) {
        if (!t) return def;
        uint16_t v = t->data<uint16_t>()[0];
        return dt == DataType::kFloat16 ? half_to_float(v) : bfloat16_to_float(v);
      };
      float lo = from_inputs_ ? h2f(tmin, -std::numeric_limits<float>::infinity()) : amin_;
      float hi = from_inputs_ ? h2f(tmax, std::numeric_limits<float>::infinity()) : amax_;
      BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, x->shape()));
      if (out.numel() == 0) return Status::ok();
      BH_ASSIGN_OR_RETURN(Tensor f, ctx.allocate_scratch(DataType::kFloat32, x->shape()));
      BH_RETURN_IF_ERROR(convert_into(*x, f, ctx.threads(), ctx.where()));
      run<float>(ctx, f.data<float>(), f.data<float>(), out.numel(), lo, hi);
      return convert_into(f, out, ctx.threads(), ctx.where());
    }
    return dispatch<kNumeric>(dt, ctx.where(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if constexpr (std::is_floating_point_v<T>) {
        lo = -std::numeric_limits<T>::infinity();
        hi = std::numeric_limits<T>::infinity();
      }
      if (from_inputs_) {
        if (tmin) lo = tmin->data<T>()[0];
        if (tmax) hi = tmax->data<T>()[0];
      } else if constexpr (std::is_floating_point_v<T>) {
        lo = static_cast<T>(amin_);
        hi = static_cast<T>(amax_);
      } else {
        return unsupported(ctx.where() + "Clip before opset 11 takes floating-point inputs only");
      }
      BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, x->shape()));
      if (out.numel() == 0) return Status::ok();
      run<T>(ctx, x->data<T>(), out.data<T>(), out.numel(), lo, hi);
      return Status::ok();
    });
  }

 private:
  template <class T>
  static void run(KernelContext& ctx, const T* in, T* out, int64_t n, T lo, T hi) {
    parallel_for(ctx.threads(), n, kCheap, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T v = in[i] < lo ? lo : in[i];
        out[i] = v > hi ? hi : v;
      }
    });
  }
  bool from_inputs_;
  float amin_, amax_;
};

}  // namespace

// The Sigmoid and Tanh kernels' float32 values, for QLinearEltwise (quant_eltwise.cc):
// the same inline functions compiled here, with this file's flags, give the same bits.
void sigmoid_rows_f32(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = t_sigmoid(x[i]);
}
void tanh_rows_f32(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = t_tanh(x[i]);
}

void register_elementwise_kernels(KernelTable& t) {
  t.add("Abs", 1, unary_factory<AbsOp>());
  t.add("Neg", 1, unary_factory<NegOp>());
  t.add("Sign", 9, unary_factory<SignOp>());
  t.add("Relu", 1, unary_factory<ReluOp>());
  t.add("Exp", 1, unary_factory<ExpOp>());
  t.add("Log", 1, unary_factory<LogOp>());
  t.add("Sqrt", 1, unary_factory<SqrtOp>());
  t.add("Reciprocal", 1, unary_factory<ReciprocalOp>());
  t.add("Sigmoid", 1, unary_factory<SigmoidOp>());
  t.add("Tanh", 1, unary_factory<TanhOp>());
  t.add("Erf", 9, unary_factory<ErfOp>());
  t.add("Softplus", 1, unary_factory<SoftplusOp>());
  t.add("Softsign", 1, unary_factory<SoftsignOp>());
  t.add("HardSwish", 14, unary_factory<HardSwishOp>());
  t.add("Mish", 18, unary_factory<MishOp>());
  t.add("Floor", 1, unary_factory<FloorOp>());
  t.add("Ceil", 1, unary_factory<CeilOp>());
  t.add("Round", 11, unary_factory<RoundOp>());
  t.add("Sin", 7, unary_factory<SinOp>());
  t.add("Cos", 7, unary_factory<CosOp>());
  t.add("Tan", 7, unary_factory<TanOp>());
  t.add("Asin", 7, unary_factory<AsinOp>());
  t.add("Acos", 7, unary_factory<AcosOp>());
  t.add("Atan", 7, unary_factory<AtanOp>());
  t.add("Sinh", 9, unary_factory<SinhOp>());
  t.add("Cosh", 9, unary_factory<CoshOp>());
  t.add("Asinh", 9, unary_factory<AsinhOp>());
  t.add("Acosh", 9, unary_factory<AcoshOp>());
  t.add("Atanh", 9, unary_factory<AtanhOp>());
  t.add("BitwiseNot", 18, unary_factory<BitwiseNotOp>());
  t.add("Not", 1, unary_factory<NotOp>());
  t.add("LeakyRelu", 1, unary_factory<LeakyReluOp>());
  t.add("Elu", 1, unary_factory<EluOp>());
  t.add("Selu", 1, unary_factory<SeluOp>());
  t.add("Celu", 12, unary_factory<CeluOp>());
  t.add("HardSigmoid", 1, unary_factory<HardSigmoidOp>());
  t.add("ThresholdedRelu", 10, unary_factory<ThresholdedReluOp>());
  t.add("Swish", 24, unary_factory<SwishOp>());
  t.add("Gelu", 20, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    std::string a = info.node.attr_string("approximate", "none");
    if (a != "none" && a != "tanh")
      return invalid_model(info.where() + "attribute 'approximate' must be 'none' or 'tanh', got '" + a + "'");
    return unary_factory<GeluOp>()(info);
  });
  t.add("Shrink", 9, unary_factory<ShrinkOp>());
  t.add("IsNaN", 9, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {kFloats, true}));
    return std::unique_ptr<Kernel>(new ClassifyKernel(true, false, false));
  });
  t.add("IsInf", 10, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {kFloats, true}));
    return std::unique_ptr<Kernel>(new ClassifyKernel(false, info.node.attr_int("detect_negative", 1) != 0,
                                                      info.node.attr_int("detect_positive", 1) != 0));
  });
  t.add("Clip", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {kFloats, true}));
    return std::unique_ptr<Kernel>(new ClipKernel(false, info.node.attr_float("min", std::numeric_limits<float>::lowest()),
                                                  info.node.attr_float("max", std::numeric_limits<float>::max())));
  });
  t.add("Clip", 11, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {kNumeric, true}));
    return std::unique_ptr<Kernel>(new ClipKernel(true, 0.0f, 0.0f));
  });
  ew::register_binary_kernels(t);
  ew::register_cast_kernels(t);
}

}  // namespace bulkhead::cpu
