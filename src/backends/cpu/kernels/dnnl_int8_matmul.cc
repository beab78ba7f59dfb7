// MatMulInteger, QLinearMatMul and the internal QLinearGemm and QLinearConvTranspose on
// oneDNN's int8 matrix product (VNNI / AMX-INT8 where the CPU has them), for the form
// quantised models use: A [..., M, K] (uint8 or int8, one zero point) times a 2-D B
// [K, N]. A's batch folds into its rows. (QLinearConvTranspose: further below.)
//
// oneDNN takes signed B without a zero point here: a constant B with one (uint8 weights
// with zero point 128, say) is shifted into int8 once at session creation when
// B - b_zero_point fits, and packed for the primitive; a B given at run time must be
// int8 with zero points 0. The primitive writes the int32 sums; QLinearMatMul's
// requantisation (a_scale[m] * b_scale[n] / y_scale, y's zero point) runs here, as the
// reference computes it: oneDNN's int32 result passes through float32, which is the
// float32 value of the sum the reference scales. MatMulInteger's result must be exact:
// it uses oneDNN only when K * max|A - a_zp| * max|B| is below 2^24 on each run's data.
// QLinearGemm's bias joins the int32 sums exactly, before the requantisation.
// Every other form (batched B, per-row zero points of A, shapes oneDNN has no kernel
// for) runs on the reference loop, which also gives every error message.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/dnnl_common.h"
#include "backends/cpu/kernels/dnnl_int8.h"
#include "backends/cpu/kernels/quant_util.h"
#include "backend/conv_attrs.h"

namespace bulkhead::cpu {
namespace {

using namespace dnnl_util;

// QLinearMatMul's requantisation of one row, as the reference computes it: the int32 sum
// (plus QLinearGemm's bias, summed exactly) times the column's multiplier in float32,
// rounded half to even, plus y's zero point, clamped to [lo, hi] (stored as a byte of y's
// type); a NaN product gives the zero point.
__attribute__((noinline)) void requantize_row(const int32_t* __restrict acc, const float* __restrict mult,
                                              uint8_t* __restrict y, int64_t n, int32_t zy, int32_t lo, int32_t hi) {
  const float z = static_cast<float>(zy), rlo = static_cast<float>(lo - zy), rhi = static_cast<float>(hi - zy);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<uint8_t>(round_to_quantized(static_cast<float>(acc[i]) * mult[i], z, rlo, rhi));
}
// With a bias: `wide` sums acc + bias in int64 (exact always, but a scalar loop where the
// CPU converts no int64 vectors to float); otherwise in int32, which vectorises and is
// exact where the caller knows the sum fits (bias_sums_fit).
template <bool wide>
__attribute__((noinline)) void requantize_row(const int32_t* __restrict acc, const int32_t* __restrict bias,
                                              const float* __restrict mult, uint8_t* __restrict y, int64_t n, int32_t zy,
                                              int32_t lo, int32_t hi) {
  const float z = static_cast<float>(zy), rlo = static_cast<float>(lo - zy), rhi = static_cast<float>(hi - zy);
  for (int64_t i = 0; i < n; ++i) {
    const float sum = wide ? static_cast<float>(int64_t{acc[i]} + bias[i]) : static_cast<float>(acc[i] + bias[i]);
    y[i] = static_cast<uint8_t>(round_to_quantized(sum * mult[i], z, rlo, rhi));
  }
}

// Whether every sum of K products of an 8-bit activation less its zero point (|v| <= 255)
// and a weight of magnitude up to `b_max`, plus one of the `n` biases, fits int32.
bool bias_sums_fit(int64_t K, int b_max, const int32_t* bias, int64_t n) {
  int64_t most = 0;
  for (int64_t i = 0; i < n; ++i) most = std::max<int64_t>(most, std::abs(int64_t{bias[i]}));
  return K * 255 * int64_t{b_max} + most < (int64_t{1} << 31);
}

class Int8MatMulKernel final : public Kernel {
 public:
  Int8MatMulKernel(Int8MatMulKind kind, Tensor b_s8, int b_max, LambdaKernel::Fn reference, dnnl::engine eng)
      : qlinear_(kind != Int8MatMulKind::kInteger),
        gemm_(kind == Int8MatMulKind::kQLinearGemm),
        b_s8_(std::move(b_s8)),
        b_max_(b_max),
        reference_(std::move(reference)),
        eng_(std::move(eng)) {}
  Status compute(KernelContext& ctx) const override;
  // Packed weights are then shared with the Env's other sessions (KernelInfo::shared).
  void share_with(std::shared_ptr<SharedConstants> shared) { shared_ = std::move(shared); }
  // Where oneDNN's int8 sums are not exact (no VNNI, int8_sums_exact): constant B as
  // float32, for an fp32 product whose sums are exact integers (below 2^24).
  void set_float_weights(Tensor b_f32) { b_f32_ = std::move(b_f32); }
  // Builds at session creation the plan a run will use (the primitive, B packed), where B
  // is constant and A's shape and type are fixed before any run: the first run is then as
  // fast as the next. Call after the set_* methods.
  void prepare(const KernelInfo& info) const;
  // The int32 sums (A - za) x B for this kernel's constant B [K, N] and A [R, K] (row-major,
  // of type `at`, at `a`), into `sums` [R, N]. False, nothing written, where the product
  // does not run here (no constant B, sums the fp32 path would not hold exactly, no oneDNN
  // kernel for it): the caller computes them otherwise.
  Result<bool> constant_b_sums(KernelContext& ctx, const void* a, DataType at, int64_t R, int32_t za, int32_t* sums) const;
  // Builds the plan for A [R, K] of type `at` now (a caller's prepare()).
  void prepare_rows(int64_t R, DataType at, int threads) const;

 private:
  struct Plan {
    bool use_ref = false;
    dnnl::matmul prim;
    memory::desc src_md, w_md, user_w, dst_md, scratch_md;
    bool re_w = false;
    memory packed_w;
    std::shared_ptr<const void> packed_hold;  // keeps packed_w's bytes (shared) alive
    bool has_packed = false;
    bool f32 = false;  // A - za and b_f32_ as float32 (never int8)
  };
  std::shared_ptr<const Plan> plan_for(int64_t R, int64_t K, int64_t N, DataType at, bool f32) const;
  // Runs plan `p`: src `a` (A, or A - za as float32 on the fp32 path), B at `b` where not
  // packed, into `dst`.
  Status execute(KernelContext& ctx, const Plan& p, const void* a, const void* b, int32_t za, void* dst) const;

  bool qlinear_;  // QLinearMatMul or QLinearGemm: requantised
  bool gemm_;     // QLinearGemm: input 8, when given, is an int32 bias [N]
  Tensor b_s8_;    // constant B less its zero point, int8 [K, N] (undefined: none)
  Tensor b_f32_;   // the same as float32 where the fp32 path is used (undefined: not made)
  int b_max_ = 128;
  LambdaKernel::Fn reference_;
  dnnl::engine eng_;
  std::shared_ptr<SharedConstants> shared_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  CallPool calls_{eng_};
};

std::shared_ptr<const Int8MatMulKernel::Plan> Int8MatMulKernel::plan_for(int64_t R, int64_t K, int64_t N, DataType at,
                                                                         bool f32) const {
  const std::vector<int64_t> key{R, K, N, static_cast<int64_t>(at), f32 ? 1 : 0, omp_get_max_threads()};
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  auto p = std::make_shared<Plan>();
  try {
    p->f32 = f32;
    const auto f = memory::data_type::f32;
    const auto src_t = f32 ? f : at == DataType::kUInt8 ? memory::data_type::u8 : memory::data_type::s8;
    const auto wt = f32 ? f : memory::data_type::s8;
    const Tensor& b_const = f32 ? b_f32_ : b_s8_;
    p->src_md = memory::desc({R, K}, src_t, memory::format_tag::ab);
    p->user_w = memory::desc({K, N}, wt, memory::format_tag::ab);
    p->dst_md = memory::desc({R, N}, f32 ? f : memory::data_type::s32, memory::format_tag::ab);
    const memory::desc w_any = b_const.defined() ? memory::desc({K, N}, wt, memory::format_tag::any) : p->user_w;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (!f32) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::matmul::desc d(p->src_md, w_any, p->dst_md);
    dnnl::matmul::primitive_desc pd(d, attr, eng_);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "reference kernel only");
    p->w_md = pd.weights_desc();
    p->scratch_md = pd.scratchpad_desc();
    p->prim = dnnl::matmul(pd);
    if (b_const.defined()) {
      Reorder re;
      if (p->w_md != p->user_w) re = Reorder::make(eng_, p->user_w, p->w_md);
      PackedWeights pw = pack_constant_shared(shared_, f32 ? "int-matmul-b-f32" : "int-matmul-b", eng_, p->user_w, p->w_md,
                                              p->w_md != p->user_w ? &re : nullptr, b_const);
      p->packed_w = pw.mem;
      p->packed_hold = std::move(pw.hold);
      p->has_packed = true;
    }
  } catch (const dnnl::error&) {
    p->use_ref = true;
  }
  plans_.emplace(key, p);
  return p;
}

void Int8MatMulKernel::prepare(const KernelInfo& info) const {
  std::optional<Shape> a = info.static_input_shape(0);
  const DataType at = info.graph_input_type(0);
  if (!b_s8_.defined() || !a || a->size() < 2 || a->back() != b_s8_.dim(0)) return;
  prepare_rows(shape_numel(*a) / std::max<int64_t>(a->back(), 1), at, prepared_threads(info));
}

void Int8MatMulKernel::prepare_rows(int64_t R, DataType at, int threads) const {
  if (!b_s8_.defined() || R <= 0 || (at != DataType::kUInt8 && at != DataType::kInt8)) return;
  const bool f32 = !int8_sums_exact(at == DataType::kUInt8, b_max_);
  if (f32 && !b_f32_.defined()) return;
  OmpThreadsScope scope(threads);
  try {
    plan_for(R, b_s8_.dim(0), b_s8_.dim(1), at, f32);
  } catch (const std::exception&) {
    // Out of memory packing B: the first run tries again and reports it.
  }
}

Status Int8MatMulKernel::execute(KernelContext& ctx, const Plan& p, const void* a, const void* b, int32_t za,
                                 void* dst_p) const {
  CallScratch sc{ctx, {}};
  try {
    CallPool::Call call(calls_);
    int32_t za32 = za;
    const memory& src = call.memory(p.src_md, const_cast<void*>(a));
    const memory& wm = p.has_packed ? p.packed_w : call.memory(p.user_w, const_cast<void*>(b));
    const memory& dst = call.memory(p.dst_md, dst_p);
    const memory* zero_point = p.f32 ? nullptr : &call.memory(zero_point_md(), &za32);
    const memory* scratch = nullptr;
    if (size_t ss = p.scratch_md.get_size()) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(ss));
      scratch = &call.memory(p.scratch_md, buf);
    }
    call.execute(p.prim, {{DNNL_ARG_SRC, &src}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_DST, &dst},
                          {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point}, {DNNL_ARG_SCRATCHPAD, scratch}});
  } catch (const dnnl::error& e) {
    return internal_error(ctx.where() + "oneDNN failed: " + e.what());
  }
  return Status::ok();
}

Result<bool> Int8MatMulKernel::constant_b_sums(KernelContext& ctx, const void* a, DataType at, int64_t R, int32_t za,
                                               int32_t* sums) const {
  if (!b_s8_.defined() || R <= 0 || (at != DataType::kUInt8 && at != DataType::kInt8)) return false;
  const int64_t K = b_s8_.dim(0), N = b_s8_.dim(1);
  const bool f32 = !int8_sums_exact(at == DataType::kUInt8, b_max_);
  if (f32 && !b_f32_.defined()) return false;
  Tensor af, sums_f;
  if (f32) {
    // A - za as float32, the sums exact integers below 2^24 only.
    if (K * largest_shifted(a, at, R * K, za) * b_max_ >= (int64_t{1} << 24)) return false;
    BH_ASSIGN_OR_RETURN(af, ctx.allocate_scratch(DataType::kFloat32, Shape{R, K}));
    shifted_to_float(a, at, R * K, za, af.data<float>(), ctx.threads());
    BH_ASSIGN_OR_RETURN(sums_f, ctx.allocate_scratch(DataType::kFloat32, Shape{R, N}));
  }
  auto p = plan_for(R, K, N, at, f32);
  if (p->use_ref) return false;
  BH_RETURN_IF_ERROR(execute(ctx, *p, f32 ? af.raw() : a, nullptr, za, f32 ? sums_f.raw() : static_cast<void*>(sums)));
  if (f32) float_sums_to_int32(sums_f.data<float>(), sums, R * N, ctx.threads());
  return true;
}

Status Int8MatMulKernel::compute(KernelContext& ctx) const {
  // MatMulInteger: A, B, [a_zero_point], [b_zero_point].
  // QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
  const int bi = qlinear_ ? 3 : 1, azi = 2, bzi = qlinear_ ? 5 : 3;
  const Tensor* A = ctx.input(0);
  const Tensor* B = ctx.input(bi);
  auto int8 = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (!A || !B || !int8(A->dtype()) || !int8(B->dtype()) || A->rank() < 2 || B->rank() != 2 || A->dim(-1) != B->dim(0) ||
      A->numel() == 0 || B->numel() == 0)
    return reference_(ctx);
  const int64_t M = A->dim(-2), K = A->dim(-1), N = B->dim(1), R = A->numel() / K;
  // A's zero point: one value of A's type.
  const Tensor* az = azi < ctx.num_inputs() ? ctx.input(azi) : nullptr;
  if (az && az->numel() && (az->numel() != 1 || az->dtype() != A->dtype())) return reference_(ctx);
  const int32_t za = az && az->numel() ? int_at(*az, 0) : 0;
  int b_max = b_max_;
  if (!b_s8_.defined()) {
    if (B->dtype() != DataType::kInt8) return reference_(ctx);
    if (const Tensor* bz = bzi < ctx.num_inputs() ? ctx.input(bzi) : nullptr) {
      for (int64_t i = 0; i < bz->numel(); ++i)
        if (bz->dtype() != DataType::kInt8 || int_at(*bz, i) != 0) return reference_(ctx);
    }
    b_max = 128;
  }
  const Tensor *as = nullptr, *bs = nullptr, *ys = nullptr, *yz = nullptr;
  DataType yt = DataType::kInt32;
  if (qlinear_) {
    as = ctx.input(1);
    bs = ctx.input(4);
    ys = ctx.input(6);
    yz = ctx.num_inputs() > 7 ? ctx.input(7) : nullptr;
    auto f32 = [](const Tensor* t, int64_t n) { return t && t->dtype() == DataType::kFloat32 && (t->numel() == 1 || t->numel() == n); };
    if (!f32(as, M) || !f32(bs, N) || !f32(ys, 1)) return reference_(ctx);
    if (az && az->numel() != as->numel() && az->numel()) return reference_(ctx);
    yt = yz && yz->numel() ? yz->dtype() : DataType::kUInt8;
    if (!int8(yt) || (yz && yz->numel() > 1)) return reference_(ctx);
  }
  const Tensor* bias = gemm_ && ctx.num_inputs() > 8 ? ctx.input(8) : nullptr;
  if (bias && (bias->dtype() != DataType::kInt32 || bias->rank() != 1 || bias->dim(0) != N || !bias->on_host()))
    return reference_(ctx);
  // Without exact int8 sums here (no VNNI): an fp32 product of the same integers; constant
  // B only.
  const bool f32 = !int8_sums_exact(A->dtype() == DataType::kUInt8, b_max);
  if (f32 && !b_f32_.defined()) return reference_(ctx);
  if (!qlinear_ || f32) {
    // int32 sums through float32 (MatMulInteger's, and the fp32 path's): exact only below 2^24.
    if (K * largest_shifted(A->raw(), A->dtype(), A->numel(), za) * b_max >= (int64_t{1} << 24)) return reference_(ctx);
  }

  auto p = plan_for(R, K, N, A->dtype(), f32);
  if (p->use_ref) return reference_(ctx);
  Shape out(A->shape().begin(), A->shape().end() - 1);
  out.push_back(N);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, yt, out));
  Tensor sums;
  if (qlinear_) {
    BH_ASSIGN_OR_RETURN(sums, ctx.allocate_scratch(DataType::kInt32, out));
  }
  Tensor& dst_t = qlinear_ ? sums : y;
  // The fp32 path: A - za and the sums as float32 (exact integers), the sums converted below.
  Tensor af, sums_f;
  if (f32) {
    BH_ASSIGN_OR_RETURN(af, ctx.allocate_scratch(DataType::kFloat32, A->shape()));
    BH_ASSIGN_OR_RETURN(sums_f, ctx.allocate_scratch(DataType::kFloat32, out));
    shifted_to_float(A->raw(), A->dtype(), A->numel(), za, af.data<float>(), ctx.threads());
  }
  BH_RETURN_IF_ERROR(execute(ctx, *p, f32 ? af.raw() : A->raw(), B->raw(), za, f32 ? sums_f.raw() : dst_t.raw()));
  if (f32) float_sums_to_int32(sums_f.data<float>(), dst_t.data<int32_t>(), dst_t.numel(), ctx.threads());
  if (qlinear_) {
    const int32_t lo = yt == DataType::kUInt8 ? 0 : -128, hi = yt == DataType::kUInt8 ? 255 : 127;
    const float y_scale = float_at(*ys, 0);
    const int32_t zy = yz && yz->numel() ? int_at(*yz, 0) : 0;
    std::vector<float> bsv(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) bsv[n] = float_at(*bs, bs->numel() == 1 ? 0 : n);
    // One multiplier per column for each of A's scales (one, or one per row of M).
    const int64_t scales = as->numel() == 1 ? 1 : M;
    std::vector<float> mults(static_cast<size_t>(scales * N));
    for (int64_t i = 0; i < scales; ++i)
      for (int64_t n = 0; n < N; ++n) mults[i * N + n] = float_at(*as, i) * bsv[n] / y_scale;
    const int32_t* acc = sums.data<int32_t>();
    uint8_t* out8 = static_cast<uint8_t*>(y.raw());
    const bool narrow = bias && bias_sums_fit(K, b_max, bias->data<int32_t>(), N);
    parallel_for(ctx.threads(), R, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* mult = mults.data() + (scales == 1 ? 0 : r % M) * N;
        if (narrow) requantize_row<false>(acc + r * N, bias->data<int32_t>(), mult, out8 + r * N, N, zy, lo, hi);
        else if (bias) requantize_row<true>(acc + r * N, bias->data<int32_t>(), mult, out8 + r * N, N, zy, lo, hi);
        else requantize_row(acc + r * N, mult, out8 + r * N, N, zy, lo, hi);
      }
    });
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// QLinearConvTranspose (internal, backend/qlinear_conv_transpose.h): a ConvTranspose whose
// kernel equals its stride. Each input pixel's C values times the weights [C, kh·kw·M]
// (columns (i, j, m)) are its kh x kw block of M outputs: one int8 product A [N·H·W, C] x
// B, A the channels-last x itself, then each row's sums requantised into its block.

// x[n, c, h, w] of a [N, C, H, W] or channels-last [N, H, W, C] tensor, as an int.
int32_t x_at(const Tensor& x, bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W) {
  return int_at(x, nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w);
}

// The inputs of a QLinearConvTranspose, checked.
struct DeconvArgs {
  const Tensor *x = nullptr, *w = nullptr, *xs = nullptr, *xz = nullptr, *ws = nullptr, *wz = nullptr, *ys = nullptr,
               *yz = nullptr, *b = nullptr;
  int64_t N = 0, C = 0, H = 0, W = 0, M = 0, kh = 0, kw = 0;
  DataType yt = DataType::kUInt8;
};

Result<DeconvArgs> deconv_args(KernelContext& ctx, bool x_nhwc, const ConvAttrs& attrs) {
  const char* names[9] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B"};
  const Tensor* in[9] = {};
  for (int i = 0; i < 9; ++i) {
    const bool optional = i == 2 || i == 5 || i == 7 || i == 8;
    BH_ASSIGN_OR_RETURN(in[i], optional ? optional_input(ctx, i, names[i]) : required_input(ctx, i, names[i]));
  }
  DeconvArgs a;
  a.x = in[0], a.xs = in[1], a.xz = in[2], a.w = in[3], a.ws = in[4], a.wz = in[5], a.ys = in[6], a.yz = in[7], a.b = in[8];
  const std::string& where = ctx.where();
  auto eight_bit = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (!eight_bit(a.x->dtype()) || !eight_bit(a.w->dtype()))
    return unsupported(where + "QLinearConvTranspose takes int8/uint8 x and w, got " + dtype_name(a.x->dtype()) + " and " +
                       dtype_name(a.w->dtype()));
  if (a.x->rank() != 4 || a.w->rank() != 4)
    return invalid_argument(where + "x and w must have rank 4, got " + a.x->describe() + " and " + a.w->describe());
  a.N = a.x->dim(0);
  a.C = a.x->dim(x_nhwc ? 3 : 1);
  a.H = a.x->dim(x_nhwc ? 1 : 2);
  a.W = a.x->dim(x_nhwc ? 2 : 3);
  a.M = a.w->dim(1), a.kh = a.w->dim(2), a.kw = a.w->dim(3);
  if (a.w->dim(0) != a.C)
    return invalid_argument(where + "w " + a.w->describe() + " does not fit x " + a.x->describe() + " (" +
                            std::to_string(a.C) + " channels)");
  if (!transpose_is_pixel_product(attrs, {a.w->dim(0), a.M, a.kh, a.kw}))
    return unsupported(where + "QLinearConvTranspose runs only kernels equal to their strides (group 1, no pads, "
                               "dilations, output padding or output shape)");
  auto scale = [&](const Tensor* t, int64_t n, const char* what) -> Status {
    if (t->dtype() != DataType::kFloat32 || (t->numel() != 1 && t->numel() != n))
      return invalid_argument(where + what + " must be float32 with " + (n > 1 ? "1 or " + std::to_string(n) : "one") +
                              " value(s), got " + t->describe());
    return Status::ok();
  };
  BH_RETURN_IF_ERROR(scale(a.xs, 1, "x_scale"));
  BH_RETURN_IF_ERROR(scale(a.ws, a.M, "w_scale"));
  BH_RETURN_IF_ERROR(scale(a.ys, 1, "y_scale"));
  if (a.xz && (a.xz->dtype() != a.x->dtype() || a.xz->numel() != 1))
    return invalid_argument(where + "x_zero_point must be one value of x's type, got " + a.xz->describe());
  if (a.wz && (a.wz->dtype() != a.w->dtype() || a.wz->numel() != a.ws->numel()))
    return invalid_argument(where + "w_zero_point " + a.wz->describe() + " does not match w and w_scale " + a.ws->describe());
  if (a.yz && (!eight_bit(a.yz->dtype()) || a.yz->numel() != 1))
    return invalid_argument(where + "y_zero_point must be one int8/uint8 value, got " + a.yz->describe());
  if (a.b && (a.b->dtype() != DataType::kInt32 || a.b->rank() != 1 || a.b->dim(0) != a.M))
    return invalid_argument(where + "B must be int32 [" + std::to_string(a.M) + "], got " + a.b->describe());
  a.yt = a.yz ? a.yz->dtype() : DataType::kUInt8;
  return a;
}

Shape deconv_y_shape(const DeconvArgs& a, bool y_nhwc) {
  return y_nhwc ? Shape{a.N, a.H * a.kh, a.W * a.kw, a.M} : Shape{a.N, a.M, a.H * a.kh, a.W * a.kw};
}

// y's multiplier for output channel m: x_scale · w_scale[m] / y_scale, in float32.
std::vector<float> deconv_multipliers(const DeconvArgs& a) {
  std::vector<float> mult(static_cast<size_t>(a.M));
  for (int64_t m = 0; m < a.M; ++m) mult[m] = float_at(*a.xs, 0) * float_at(*a.ws, a.ws->numel() == 1 ? 0 : m) / float_at(*a.ys, 0);
  return mult;
}

// The reference loops (and every error message).
Status qlinear_deconv_reference(KernelContext& ctx, bool x_nhwc, bool y_nhwc, const ConvAttrs& attrs) {
  BH_ASSIGN_OR_RETURN(DeconvArgs a, deconv_args(ctx, x_nhwc, attrs));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, a.yt, deconv_y_shape(a, y_nhwc)));
  const std::vector<float> mult = deconv_multipliers(a);
  const int32_t zx = a.xz ? int_at(*a.xz, 0) : 0, zy = a.yz ? int_at(*a.yz, 0) : 0;
  const int32_t lo = a.yt == DataType::kUInt8 ? 0 : -128, hi = a.yt == DataType::kUInt8 ? 255 : 127;
  const float z = static_cast<float>(zy), rlo = static_cast<float>(lo - zy), rhi = static_cast<float>(hi - zy);
  const int64_t OH = a.H * a.kh, OW = a.W * a.kw;
  uint8_t* out = static_cast<uint8_t*>(y.raw());
  for (int64_t n = 0; n < a.N; ++n)
    for (int64_t m = 0; m < a.M; ++m) {
      const int32_t zw = a.wz ? int_at(*a.wz, a.wz->numel() == 1 ? 0 : m) : 0;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t h = oh / a.kh, i = oh % a.kh, w = ow / a.kw, j = ow % a.kw;
          int64_t acc = a.b ? a.b->data<int32_t>()[m] : 0;
          for (int64_t c = 0; c < a.C; ++c)
            acc += int64_t{x_at(*a.x, x_nhwc, n, c, h, w, a.C, a.H, a.W) - zx} *
                   (int_at(*a.w, ((c * a.M + m) * a.kh + i) * a.kw + j) - zw);
          const int64_t o = y_nhwc ? ((n * OH + oh) * OW + ow) * a.M + m : ((n * a.M + m) * OH + oh) * OW + ow;
          out[o] = static_cast<uint8_t>(round_to_quantized(static_cast<float>(acc) * mult[m], z, rlo, rhi));
        }
    }
  return Status::ok();
}

class Int8DeconvKernel final : public Kernel {
 public:
  Int8DeconvKernel(std::unique_ptr<Int8MatMulKernel> product, int b_max, int64_t C, int64_t M, int64_t kh, int64_t kw,
                   bool x_nhwc, bool y_nhwc, ConvAttrs attrs)
      : product_(std::move(product)),
        b_max_(b_max),
        C_(C),
        M_(M),
        kh_(kh),
        kw_(kw),
        x_nhwc_(x_nhwc),
        y_nhwc_(y_nhwc),
        attrs_(std::move(attrs)) {}

  // Builds the product's plan at session creation where x's shape is fixed.
  void prepare(const KernelInfo& info) const {
    std::optional<Shape> x = info.static_input_shape(0);
    if (!x || x->size() != 4 || (*x)[x_nhwc_ ? 3 : 1] != C_) return;
    product_->prepare_rows((*x)[0] * (*x)[x_nhwc_ ? 1 : 2] * (*x)[x_nhwc_ ? 2 : 3], info.graph_input_type(0),
                           prepared_threads(info));
  }

  Status compute(KernelContext& ctx) const override {
    auto reference = [&] { return qlinear_deconv_reference(ctx, x_nhwc_, y_nhwc_, attrs_); };
    auto args = deconv_args(ctx, x_nhwc_, attrs_);
    if (!args.is_ok() || args->C != C_ || args->M != M_ || args->kh != kh_ || args->kw != kw_) return reference();
    const DeconvArgs& a = *args;
    const int64_t R = a.N * a.H * a.W, KM = kh_ * kw_ * M_;
    if (R == 0) return reference();
    // A: x channels-last, [N·H·W, C].
    const void* A = a.x->raw();
    Tensor xt;
    if (!x_nhwc_) {
      BH_ASSIGN_OR_RETURN(xt, ctx.allocate_scratch(a.x->dtype(), Shape{a.N, a.H, a.W, C_}));
      const uint8_t* src = static_cast<const uint8_t*>(a.x->raw());
      uint8_t* dst = static_cast<uint8_t*>(xt.raw());
      const int64_t S = a.H * a.W;
      parallel_for(ctx.threads(), a.N * S, 1024, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
          for (int64_t c = 0; c < C_; ++c) dst[r * C_ + c] = src[((r / S) * C_ + c) * S + r % S];
      });
      A = xt.raw();
    }
    BH_ASSIGN_OR_RETURN(Tensor sums, ctx.allocate_scratch(DataType::kInt32, Shape{R, KM}));
    const int32_t zx = a.xz ? int_at(*a.xz, 0) : 0;
    BH_ASSIGN_OR_RETURN(bool done, product_->constant_b_sums(ctx, A, a.x->dtype(), R, zx, sums.data<int32_t>()));
    if (!done) return reference();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, a.yt, deconv_y_shape(a, y_nhwc_)));
    // One input row's sums (W pixels x kh·kw·M, contiguous) are requantised in one pass:
    // the multiplier and bias of each of its columns, laid out once.
    const std::vector<float> mult = deconv_multipliers(a);
    const int64_t L = a.W * KM;
    std::vector<float> row_mult(static_cast<size_t>(L));
    std::vector<int32_t> row_bias(static_cast<size_t>(L));
    for (int64_t q = 0; q < L; ++q) {
      row_mult[q] = mult[q % M_];
      row_bias[q] = a.b ? a.b->data<int32_t>()[q % M_] : 0;
    }
    const int32_t zy = a.yz ? int_at(*a.yz, 0) : 0;
    const int32_t lo = a.yt == DataType::kUInt8 ? 0 : -128, hi = a.yt == DataType::kUInt8 ? 255 : 127;
    const int32_t* acc = sums.data<int32_t>();
    uint8_t* out = static_cast<uint8_t*>(y.raw());
    const int64_t H = a.H, W = a.W, OH = H * kh_, OW = W * kw_, M = M_, kh = kh_, kw = kw_;
    const bool narrow = bias_sums_fit(C_, b_max_, row_bias.data(), M);
    parallel_for(ctx.threads(), a.N * H, std::max<int64_t>(1, 16384 / std::max<int64_t>(L, 1)), [&](int64_t r0, int64_t r1) {
      std::vector<uint8_t> row(static_cast<size_t>(L));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / H, h = r % H;
        if (narrow) requantize_row<false>(acc + r * L, row_bias.data(), row_mult.data(), row.data(), L, zy, lo, hi);
        else requantize_row<true>(acc + r * L, row_bias.data(), row_mult.data(), row.data(), L, zy, lo, hi);
        // row[w][i][j][m] -> y's rows h·kh + i.
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t oh = h * kh + i;
          if (y_nhwc_) {
            uint8_t* dst = out + (n * OH + oh) * OW * M;
            for (int64_t w = 0; w < W; ++w) std::memcpy(dst + w * kw * M, row.data() + w * KM + i * kw * M, kw * M);
          } else {
            for (int64_t m = 0; m < M; ++m) {
              uint8_t* dst = out + ((n * M + m) * OH + oh) * OW;
              const uint8_t* src = row.data() + i * kw * M + m;
              for (int64_t w = 0; w < W; ++w)
                for (int64_t j = 0; j < kw; ++j) dst[w * kw + j] = src[w * KM + j * M];
            }
          }
        }
      }
    });
    return Status::ok();
  }

 private:
  std::unique_ptr<Int8MatMulKernel> product_;  // B: the weights as [C, kh·kw·M], less their zero points
  int b_max_;                                  // B's largest magnitude
  int64_t C_, M_, kh_, kw_;
  bool x_nhwc_, y_nhwc_;
  ConvAttrs attrs_;
};

}  // namespace

namespace {

// o[j] = in[j] - z[j] (kEach) or in[j] - z[0], for j < n; widens [*lo, *hi] to the values.
template <bool kEach, typename T>
void shift_span(const T* __restrict in, const int32_t* __restrict z, int8_t* __restrict o, int64_t n, int32_t* lo,
                int32_t* hi) {
  int32_t l = *lo, h = *hi;
  for (int64_t j = 0; j < n; ++j) {
    const int32_t v = int32_t{in[j]} - z[kEach ? j : 0];
    l = std::min(l, v);
    h = std::max(h, v);
    o[j] = static_cast<int8_t>(v);
  }
  *lo = l;
  *hi = h;
}

}  // namespace

void shift_to_int8(const Tensor& w, const Tensor* zp, int64_t run, Tensor* out, int* most) {
  const bool eight = w.dtype() == DataType::kInt8 || w.dtype() == DataType::kUInt8;
  if (!eight || !w.on_host() || run < 1 || (zp && zp->numel() && (zp->dtype() != w.dtype() || !zp->on_host()))) return;
  const int64_t n = w.numel(), nz = zp ? zp->numel() : 0;
  std::vector<int32_t> zs(static_cast<size_t>(std::max<int64_t>(nz, 1)), 0);
  for (int64_t j = 0; j < nz; ++j) zs[j] = int_at(*zp, j);
  Tensor t = Tensor::host(DataType::kInt8, w.shape());
  int8_t* o = t.data<int8_t>();
  int32_t lo = 0, hi = 0;
  auto shift = [&](const auto* in) {
    if (nz > 1 && run == 1) {
      // One zero point per element in turn (a MatMul's per column): rows of them.
      for (int64_t b = 0; b < n; b += nz) shift_span<true>(in + b, zs.data(), o + b, std::min(nz, n - b), &lo, &hi);
    } else {
      // Runs of one zero point (a Conv's per output channel, or one for all).
      for (int64_t b = 0, c = 0; b < n; b += run, ++c)
        shift_span<false>(in + b, &zs[c % zs.size()], o + b, std::min(run, n - b), &lo, &hi);
    }
  };
  if (w.dtype() == DataType::kUInt8) shift(w.data<uint8_t>());
  else shift(w.data<int8_t>());
  if (lo < -128 || hi > 127) return;
  *out = std::move(t);
  *most = std::max(-lo, hi);
}

Tensor float_weights(const Tensor& w_s8, int w_max, SharedConstants* shared) {
  if (!w_s8.defined() || int8_sums_exact(true, w_max)) return Tensor();
  Tensor w = Tensor::host(DataType::kFloat32, w_s8.shape());
  const int8_t* in = w_s8.data<int8_t>();
  float* out = w.data<float>();
  for (int64_t i = 0; i < w_s8.numel(); ++i) out[i] = in[i];
  return shared ? shared->intern(w) : w;
}

void shifted_to_float(const void* x, DataType t, int64_t n, int32_t z, float* out, int threads) {
  const float zf = static_cast<float>(z);
  auto shift = [&](const auto* in) {
    parallel_for(threads, n, 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = static_cast<float>(in[i]) - zf;
    });
  };
  if (t == DataType::kUInt8) shift(static_cast<const uint8_t*>(x));
  else shift(static_cast<const int8_t*>(x));
}

int64_t largest_shifted(const void* x, DataType t, int64_t n, int32_t z) {
  int64_t most = 0;
  auto scan = [&](const auto* in) {
    for (int64_t i = 0; i < n; ++i) most = std::max<int64_t>(most, std::abs(int32_t{in[i]} - z));
  };
  if (t == DataType::kUInt8) scan(static_cast<const uint8_t*>(x));
  else scan(static_cast<const int8_t*>(x));
  return most;
}

void float_sums_to_int32(const float* in, int32_t* out, int64_t n, int threads) {
  parallel_for(threads, n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = static_cast<int32_t>(in[i]);
  });
}

Result<std::unique_ptr<Kernel>> make_int8_matmul(const KernelInfo& info, Int8MatMulKind kind, LambdaKernel::Fn reference) {
  const bool qlinear = kind != Int8MatMulKind::kInteger;
  const char* env = std::getenv("BULKHEAD_CPU_INT8");
  if (env && std::string(env) == "0") return make_kernel(std::move(reference));
  const ir::Node& n = info.node;
  const int bi = qlinear ? 3 : 1, bzi = qlinear ? 5 : 3;
  auto constant = [&](int i) -> const Tensor* {
    return info.input_is_constant(i) && info.constant_inputs[i].on_host() ? &info.constant_inputs[i] : nullptr;
  };
  const bool bz_given = static_cast<size_t>(bzi) < n.inputs.size() && !n.inputs[bzi].empty();
  Tensor b_s8;
  int b_max = 128;
  if (const Tensor* b = constant(bi)) {
    const Tensor* bz = bz_given ? constant(bzi) : nullptr;
    if (b->rank() == 2 && b->dim(1) > 0 && (!bz_given || bz) && (!bz || bz->numel() <= 1 || bz->numel() == b->dim(1))) {
      shift_to_int8(*b, bz, 1, &b_s8, &b_max);
    }
  }
  if (info.shared && b_s8.defined()) b_s8 = info.shared->intern(b_s8);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    Tensor b_f32 = float_weights(b_s8, b_max, info.shared.get());
    auto k = std::make_unique<Int8MatMulKernel>(kind, std::move(b_s8), b_max, std::move(reference), std::move(eng));
    k->set_float_weights(std::move(b_f32));
    k->share_with(info.shared);
    k->prepare(info);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

Result<std::unique_ptr<Kernel>> make_qlinear_conv_transpose(const KernelInfo& info) {
  const ir::Node& n = info.node;
  ConvAttrs attrs = parse_conv_attrs(n);
  BH_RETURN_IF_ERROR(check_conv_attrs(attrs, info.where()));
  auto layout = [&](const char* attr) -> Result<bool> {
    const std::string v = n.attr_string(attr, "");
    if (!v.empty() && v != "nhwc") return invalid_argument(info.where() + "unsupported " + attr + " '" + v + "' (only nhwc)");
    return !v.empty();
  };
  BH_ASSIGN_OR_RETURN(bool xn, layout("_x_layout"));
  BH_ASSIGN_OR_RETURN(bool yn, layout("_y_layout"));
  auto reference = [=]() {
    return make_kernel([attrs, xn, yn](KernelContext& ctx) { return qlinear_deconv_reference(ctx, xn, yn, attrs); });
  };
  const char* env = std::getenv("BULKHEAD_CPU_INT8");
  if (env && std::string(env) == "0") return reference();
  // The fast path: constant w (and w_zero_point) of the geometry this operator describes.
  auto constant = [&](size_t i) -> const Tensor* {
    return info.input_is_constant(i) && info.constant_inputs[i].on_host() ? &info.constant_inputs[i] : nullptr;
  };
  const Tensor* w = constant(3);
  const bool wz_given = n.inputs.size() > 5 && !n.inputs[5].empty();
  const Tensor* wz = wz_given ? constant(5) : nullptr;
  if (!w || w->rank() != 4 || (w->dtype() != DataType::kUInt8 && w->dtype() != DataType::kInt8) || (wz_given && !wz) ||
      (wz && (wz->dtype() != w->dtype() || (wz->numel() != 1 && wz->numel() != w->dim(1)))) ||
      !transpose_is_pixel_product(attrs, {w->dim(0), w->dim(1), w->dim(2), w->dim(3)}) || w->numel() == 0)
    return reference();
  const int64_t C = w->dim(0), M = w->dim(1), kh = w->dim(2), kw = w->dim(3), KM = kh * kw * M;
  // B [C, kh·kw·M], column (i·kw + j)·M + m = w[c, m, i, j] - wz[m], when every value fits int8.
  Tensor b = Tensor::host(DataType::kInt8, Shape{C, KM});
  int8_t* bp = b.data<int8_t>();
  int most = 0;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t m = 0; m < M; ++m) {
      const int32_t z = wz ? int_at(*wz, wz->numel() == 1 ? 0 : m) : 0;
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          const int32_t v = int_at(*w, ((c * M + m) * kh + i) * kw + j) - z;
          if (v < -128 || v > 127) return reference();
          most = std::max(most, std::abs(v));
          bp[c * KM + (i * kw + j) * M + m] = static_cast<int8_t>(v);
        }
    }
  if (info.shared) b = info.shared->intern(b);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    Tensor b_f32 = float_weights(b, most, info.shared.get());
    auto product = std::make_unique<Int8MatMulKernel>(Int8MatMulKind::kInteger, std::move(b), most,
                                                      [](KernelContext& ctx) -> Status {
                                                        return internal_error(ctx.where() + "no reference for the product");
                                                      },
                                                      std::move(eng));
    product->set_float_weights(std::move(b_f32));
    product->share_with(info.shared);
    auto k = std::make_unique<Int8DeconvKernel>(std::move(product), most, C, M, kh, kw, xn, yn, std::move(attrs));
    k->prepare(info);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

}  // namespace bulkhead::cpu
