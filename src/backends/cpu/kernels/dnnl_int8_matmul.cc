// MatMulInteger, QLinearMatMul and QLinearGemm on oneDNN's int8 matrix product (VNNI / AMX-INT8 where
// the CPU has them), for the form quantised models use: A [..., M, K] (uint8 or int8, one
// zero point) times a 2-D B [K, N]. A's batch folds into its rows.
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
__attribute__((noinline)) void requantize_row(const int32_t* __restrict acc, const int32_t* __restrict bias,
                                              const float* __restrict mult, uint8_t* __restrict y, int64_t n, int32_t zy,
                                              int32_t lo, int32_t hi) {
  const float z = static_cast<float>(zy), rlo = static_cast<float>(lo - zy), rhi = static_cast<float>(hi - zy);
  for (int64_t i = 0; i < n; ++i) {
    const float sum = static_cast<float>(int64_t{acc[i]} + bias[i]);
    y[i] = static_cast<uint8_t>(round_to_quantized(sum * mult[i], z, rlo, rhi));
  }
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
  if (!b_s8_.defined() || !a || a->size() < 2 || (at != DataType::kUInt8 && at != DataType::kInt8)) return;
  const int64_t K = a->back(), N = b_s8_.dim(1);
  const int64_t R = shape_numel(*a) / std::max<int64_t>(K, 1);
  if (K != b_s8_.dim(0) || R == 0) return;
  const bool f32 = !int8_sums_exact(at == DataType::kUInt8, b_max_);
  if (f32 && !b_f32_.defined()) return;
  OmpThreadsScope threads(prepared_threads(info));
  try {
    plan_for(R, K, N, at, f32);
  } catch (const std::exception&) {
    // Out of memory packing B: the first run tries again and reports it.
  }
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
    int64_t amax = 0;
    for (int64_t i = 0; i < A->numel(); ++i) amax = std::max<int64_t>(amax, std::abs(int_at(*A, i) - za));
    if (K * amax * b_max >= (int64_t{1} << 24)) return reference_(ctx);
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
    shifted_to_float(*A, za, af.data<float>(), ctx.threads());
  }
  CallScratch sc{ctx, {}};
  try {
    CallPool::Call call(calls_);
    int32_t za32 = za;
    const memory& src = call.memory(p->src_md, f32 ? af.raw() : const_cast<void*>(A->raw()));
    const memory& wm = p->has_packed ? p->packed_w : call.memory(p->user_w, const_cast<void*>(B->raw()));
    const memory& dst = call.memory(p->dst_md, f32 ? sums_f.raw() : dst_t.raw());
    const memory* zero_point = f32 ? nullptr : &call.memory(zero_point_md(), &za32);
    const memory* scratch = nullptr;
    if (size_t ss = p->scratch_md.get_size()) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(ss));
      scratch = &call.memory(p->scratch_md, buf);
    }
    call.execute(p->prim, {{DNNL_ARG_SRC, &src}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_DST, &dst},
                           {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point}, {DNNL_ARG_SCRATCHPAD, scratch}});
  } catch (const dnnl::error& e) {
    return internal_error(ctx.where() + "oneDNN failed: " + e.what());
  }
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
    parallel_for(ctx.threads(), R, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* mult = mults.data() + (scales == 1 ? 0 : r % M) * N;
        if (bias) requantize_row(acc + r * N, bias->data<int32_t>(), mult, out8 + r * N, N, zy, lo, hi);
        else requantize_row(acc + r * N, mult, out8 + r * N, N, zy, lo, hi);
      }
    });
  }
  return Status::ok();
}

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

void shifted_to_float(const Tensor& x, int32_t z, float* out, int threads) {
  const float zf = static_cast<float>(z);
  auto shift = [&](const auto* in) {
    parallel_for(threads, x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = static_cast<float>(in[i]) - zf;
    });
  };
  if (x.dtype() == DataType::kUInt8) shift(x.data<uint8_t>());
  else shift(x.data<int8_t>());
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

}  // namespace bulkhead::cpu
