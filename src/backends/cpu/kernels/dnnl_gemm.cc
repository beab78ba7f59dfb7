// oneDNN-backed heavy operators, part 3: MatMul and Gemm.
//
// float32 products run on oneDNN's JIT sgemm (row-major, threaded with the calling
// thread's OpenMP thread count). Batched MatMul with a 2-D right operand collapses into
// one sgemm; otherwise each broadcast batch is one sgemm. float64 and integer types run on
// plain loops. With SessionOptions::precision "bf16", a product with a constant 2-D right
// operand runs on oneDNN's bfloat16 matmul (Bf16ProductKernel below).

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/dnnl_common.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu {

void register_dnnl_gemm_kernels(KernelTable& t);
Status dnnl_run_as_float32(KernelContext& ctx, DataType half, const std::function<Status(KernelContext&)>& fn);  // dnnl.cc

namespace {

// y[M,N] (+)= a[M,K] * b[K,N] with arbitrary row strides (lda, ldb) and transposes.
template <typename T>
void gemm_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, const T* b, T* y, int threads) {
  parallel_for(threads, M, 4, [&](int64_t m0, int64_t m1) {
    std::vector<T> row(static_cast<size_t>(N));
    for (int64_t i = m0; i < m1; ++i) {
      std::fill(row.begin(), row.end(), T(0));
      for (int64_t k = 0; k < K; ++k) {
        T av = ta ? a[k * M + i] : a[i * K + k];
        if (!tb) {
          const T* bp = b + k * N;
          for (int64_t j = 0; j < N; ++j) row[j] += av * bp[j];
        } else {
          for (int64_t j = 0; j < N; ++j) row[j] += av * b[j * K + k];
        }
      }
      T* yp = y + i * N;
      for (int64_t j = 0; j < N; ++j) yp[j] += alpha * row[j];
    }
  });
}

Status sgemm(const std::string& where, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
             const float* b, float beta, float* y) {
  dnnl::status st = dnnl::sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a, ta ? M : K, b, tb ? K : N, beta, y, N);
  if (st != dnnl::status::success)
    return internal_error(where + "oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)));
  return Status::ok();
}

// Offsets (in matrices) of each output batch into a broadcast operand.
std::vector<int64_t> batch_offsets(const Shape& in_batch, const Shape& out_batch) {
  int64_t n = shape_numel(out_batch);
  std::vector<int64_t> off(static_cast<size_t>(n), 0);
  if (out_batch.empty()) return off;
  auto st = broadcast_strides(in_batch, out_batch);
  std::vector<int64_t> idx(out_batch.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * st[d];
    off[i] = o;
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < out_batch[d]) break;
      idx[d] = 0;
    }
  }
  return off;
}

// ---------------------------------------------------------------------------------------
// MatMul

template <typename T>
void matmul_loops(const T* a, const T* b, T* y, const std::vector<int64_t>& oa, const std::vector<int64_t>& ob,
                  int64_t M, int64_t N, int64_t K, int threads) {
  for (size_t i = 0; i < oa.size(); ++i) {
    T* yp = y + static_cast<int64_t>(i) * M * N;
    std::fill(yp, yp + M * N, T(0));
    gemm_ref<T>(false, false, M, N, K, T(1), a + oa[i] * M * K, b + ob[i] * K * N, yp, threads);
  }
}

Status matmul_compute(KernelContext& ctx) {
  const std::string& where = ctx.where();
  const Tensor* A = ctx.input(0);
  const Tensor* B = ctx.input(1);
  if (!A || !B) return invalid_argument(where + "inputs A and B are required");
  if (A->dtype() != B->dtype())
    return invalid_argument(where + "A " + A->describe() + " and B " + B->describe() + " must have the same element type");
  if (A->dtype() == DataType::kFloat16 || A->dtype() == DataType::kBFloat16)
    return dnnl_run_as_float32(ctx, A->dtype(), [](KernelContext& c) { return matmul_compute(c); });
  if (A->rank() < 1 || B->rank() < 1)
    return invalid_argument(where + "MatMul needs operands of rank >= 1, got " + A->describe() + " and " + B->describe());
  Shape as = A->shape(), bs = B->shape();
  bool drop_m = as.size() == 1, drop_n = bs.size() == 1;
  if (drop_m) as.insert(as.begin(), 1);
  if (drop_n) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), K2 = bs[bs.size() - 2], N = bs.back();
  if (K != K2)
    return invalid_argument(where + "inner dimensions differ: A " + A->describe() + ", B " + B->describe());
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  BH_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(ab, bb, where));
  Shape yshape = batch;
  if (!drop_m) yshape.push_back(M);
  if (!drop_n) yshape.push_back(N);
  DataType dt = A->dtype();
  switch (dt) {
    case DataType::kFloat32: case DataType::kFloat64: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUInt32: case DataType::kUInt64: break;
    default: BH_UNSUPPORTED_DTYPE(where, dt);
  }
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, yshape));
  if (y.numel() == 0) return Status::ok();
  if (K == 0) {
    std::memset(y.raw(), 0, y.nbytes());
    return Status::ok();
  }
  int64_t nb = shape_numel(batch);
  if (dt == DataType::kFloat32) {
    const float* a = A->data<float>();
    const float* b = B->data<float>();
    float* yp = y.data<float>();
    if (shape_numel(bb) == 1 && shape_numel(ab) == nb) {
      // B is one matrix and A's batches are all distinct: one [nb*M, K] x [K, N] product.
      return sgemm(where, false, false, nb * M, N, K, 1.f, a, b, 0.f, yp);
    }
    auto oa = batch_offsets(ab, batch), ob = batch_offsets(bb, batch);
    for (int64_t i = 0; i < nb; ++i)
      BH_RETURN_IF_ERROR(sgemm(where, false, false, M, N, K, 1.f, a + oa[i] * M * K, b + ob[i] * K * N, 0.f, yp + i * M * N));
    return Status::ok();
  }
  auto oa = batch_offsets(ab, batch), ob = batch_offsets(bb, batch);
  int th = ctx.threads();
  switch (dt) {
    case DataType::kFloat64: matmul_loops<double>(A->data<double>(), B->data<double>(), y.data<double>(), oa, ob, M, N, K, th); break;
    case DataType::kInt32: matmul_loops<int32_t>(A->data<int32_t>(), B->data<int32_t>(), y.data<int32_t>(), oa, ob, M, N, K, th); break;
    case DataType::kInt64: matmul_loops<int64_t>(A->data<int64_t>(), B->data<int64_t>(), y.data<int64_t>(), oa, ob, M, N, K, th); break;
    case DataType::kUInt32: matmul_loops<uint32_t>(A->data<uint32_t>(), B->data<uint32_t>(), y.data<uint32_t>(), oa, ob, M, N, K, th); break;
    case DataType::kUInt64: matmul_loops<uint64_t>(A->data<uint64_t>(), B->data<uint64_t>(), y.data<uint64_t>(), oa, ob, M, N, K, th); break;
    default: BH_UNSUPPORTED_DTYPE(where, dt);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Gemm

struct GemmAttrs {
  bool ta = false, tb = false;
  float alpha = 1.f, beta = 1.f;
};

// Writes C broadcast to [M, N] into y, scaled by `scale`.
template <typename T>
void fill_broadcast_c(const Tensor& c, int64_t M, int64_t N, T scale, T* y) {
  const T* cp = c.data<T>();
  int64_t cm = 1, cn = 1;
  if (c.rank() == 2) {
    cm = c.dim(0);
    cn = c.dim(1);
  } else if (c.rank() == 1) {
    cn = c.dim(0);
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = scale * cp[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
}

template <typename T>
void gemm_typed(const GemmAttrs& g, const Tensor& A, const Tensor& B, const Tensor* C, Tensor& y, int64_t M, int64_t N,
                int64_t K, int threads) {
  T* yp = y.data<T>();
  if (C && static_cast<T>(g.beta) != T(0)) fill_broadcast_c<T>(*C, M, N, static_cast<T>(g.beta), yp);
  else std::fill(yp, yp + M * N, T(0));
  gemm_ref<T>(g.ta, g.tb, M, N, K, static_cast<T>(g.alpha), A.data<T>(), B.data<T>(), yp, threads);
}

Status gemm_compute(const GemmAttrs& g, KernelContext& ctx) {
  const std::string& where = ctx.where();
  const Tensor* A = ctx.input(0);
  const Tensor* B = ctx.input(1);
  const Tensor* C = ctx.input(2);
  if (!A || !B) return invalid_argument(where + "inputs A and B are required");
  if (C && !C->defined()) C = nullptr;
  if (A->rank() != 2 || B->rank() != 2)
    return invalid_argument(where + "A and B must be 2-D, got " + A->describe() + " and " + B->describe());
  DataType dt = A->dtype();
  if (B->dtype() != dt || (C && C->dtype() != dt))
    return invalid_argument(where + "A, B and C must have the same element type");
  if (dt == DataType::kFloat16 || dt == DataType::kBFloat16)
    return dnnl_run_as_float32(ctx, dt, [&g](KernelContext& c) { return gemm_compute(g, c); });
  int64_t M = g.ta ? A->dim(1) : A->dim(0), K = g.ta ? A->dim(0) : A->dim(1);
  int64_t K2 = g.tb ? B->dim(1) : B->dim(0), N = g.tb ? B->dim(0) : B->dim(1);
  if (K != K2)
    return invalid_argument(where + "inner dimensions differ: A " + A->describe() + (g.ta ? " (transposed)" : "") + ", B " +
                            B->describe() + (g.tb ? " (transposed)" : ""));
  if (C) {
    bool ok = C->rank() <= 2;
    if (ok && C->rank() == 2) ok = (C->dim(0) == 1 || C->dim(0) == M) && (C->dim(1) == 1 || C->dim(1) == N);
    if (ok && C->rank() == 1) ok = C->dim(0) == 1 || C->dim(0) == N;
    if (!ok)
      return invalid_argument(where + "C " + C->describe() + " cannot be broadcast to [" + std::to_string(M) + "," +
                              std::to_string(N) + "]");
  }
  switch (dt) {
    case DataType::kFloat32: case DataType::kFloat64: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUInt32: case DataType::kUInt64: break;
    default: BH_UNSUPPORTED_DTYPE(where, dt);
  }
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, Shape{M, N}));
  if (y.numel() == 0) return Status::ok();
  if (dt == DataType::kFloat32) {
    float* yp = y.data<float>();
    bool use_c = C && g.beta != 0.f;
    if (use_c) fill_broadcast_c<float>(*C, M, N, 1.f, yp);
    if (K == 0) {
      if (!use_c) std::fill(yp, yp + M * N, 0.f);
      else for (int64_t i = 0; i < M * N; ++i) yp[i] *= g.beta;
      return Status::ok();
    }
    return sgemm(where, g.ta, g.tb, M, N, K, g.alpha, A->data<float>(), B->data<float>(), use_c ? g.beta : 0.f, yp);
  }
  int th = ctx.threads();
  switch (dt) {
    case DataType::kFloat64: gemm_typed<double>(g, *A, *B, C, y, M, N, K, th); break;
    case DataType::kInt32: gemm_typed<int32_t>(g, *A, *B, C, y, M, N, K, th); break;
    case DataType::kInt64: gemm_typed<int64_t>(g, *A, *B, C, y, M, N, K, th); break;
    case DataType::kUInt32: gemm_typed<uint32_t>(g, *A, *B, C, y, M, N, K, th); break;
    case DataType::kUInt64: gemm_typed<uint64_t>(g, *A, *B, C, y, M, N, K, th); break;
    default: BH_UNSUPPORTED_DTYPE(where, dt);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// bfloat16 products (SessionOptions::precision "bf16")

using namespace dnnl_util;

// MatMul of A [..., M, K] by a constant B [K, N], or Gemm (A [M, K] or transposed, by a
// constant B [K, N] or transposed, plus C): B converted to bfloat16 and packed once (shared
// with the Env's other sessions), A converted to bfloat16 on each run, the sums and the
// output in float32. Where oneDNN has no optimised bfloat16 kernel for a shape, or A is
// not float32, the float32 product above runs instead.
class Bf16ProductKernel final : public Kernel {
 public:
  Bf16ProductKernel(bool gemm, GemmAttrs g, Tensor b, dnnl::engine eng, std::shared_ptr<SharedConstants> shared)
      : gemm_(gemm), g_(g), b_(std::move(b)), eng_(std::move(eng)), shared_(std::move(shared)) {}

  Status compute(KernelContext& ctx) const override {
    const Tensor* A = ctx.input(0);
    const Tensor* C = gemm_ ? ctx.input(2) : nullptr;
    if (C && !C->defined()) C = nullptr;
    auto as_float32 = [&]() { return gemm_ ? gemm_compute(g_, ctx) : matmul_compute(ctx); };
    if (!A || A->dtype() != DataType::kFloat32 || (C && C->dtype() != DataType::kFloat32)) return as_float32();
    const int64_t K = g_.tb ? b_.dim(1) : b_.dim(0), N = g_.tb ? b_.dim(0) : b_.dim(1);
    int64_t M = 0;
    Shape yshape;
    if (gemm_) {
      if (A->rank() != 2) return as_float32();  // its error message
      if ((g_.ta ? A->dim(0) : A->dim(1)) != K) return as_float32();
      M = g_.ta ? A->dim(1) : A->dim(0);
      yshape = {M, N};
    } else {
      if (A->rank() < 2 || A->dim(A->rank() - 1) != K) return as_float32();
      M = A->numel() / std::max<int64_t>(K, 1);
      yshape = A->shape();
      yshape.back() = N;
    }
    if (M == 0 || K == 0 || N == 0) return as_float32();
    bool use_c = C && g_.beta != 0.f;
    if (use_c) {
      bool ok = C->rank() <= 2;
      if (ok && C->rank() == 2) ok = (C->dim(0) == 1 || C->dim(0) == M) && (C->dim(1) == 1 || C->dim(1) == N);
      if (ok && C->rank() == 1) ok = C->dim(0) == 1 || C->dim(0) == N;
      if (!ok) return as_float32();
    }
    std::shared_ptr<const Plan> p = plan_for(M, use_c);
    if (!p) return as_float32();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, yshape));
    if (use_c) fill_broadcast_c<float>(*C, M, N, 1.f, y.data<float>());
    CallScratch sc{ctx, {}};
    try {
      CallPool::Call call(calls_);
      const memory& usr_a = call.memory(p->user_a, const_cast<void*>(A->raw()));
      BH_ASSIGN_OR_RETURN(void* abuf, sc.get(p->a_md.get_size()));
      const memory& a = call.memory(p->a_md, abuf);
      BH_RETURN_IF_ERROR(run_reorder(p->a_re, call, usr_a, a, sc));
      const memory& dst = call.memory(p->dst_md, y.raw());
      const memory* scratch = nullptr;
      if (size_t ss = p->scratch_md.get_size()) {
        BH_ASSIGN_OR_RETURN(void* buf, sc.get(ss));
        scratch = &call.memory(p->scratch_md, buf);
      }
      call.execute(p->prim, {{DNNL_ARG_SRC, &a}, {DNNL_ARG_WEIGHTS, &p->packed_b}, {DNNL_ARG_DST, &dst},
                             {DNNL_ARG_SCRATCHPAD, scratch}});
    } catch (const dnnl::error& e) {
      return internal_error(ctx.where() + "oneDNN bfloat16 matmul failed: " + e.what());
    }
    return Status::ok();
  }

 private:
  struct Plan {
    dnnl::primitive prim;
    memory::desc user_a, a_md, dst_md, scratch_md;
    Reorder a_re;
    memory packed_b;
    std::shared_ptr<const void> packed_hold;
  };

  // The primitive for M rows (per thread count granted), or null where oneDNN offers only
  // its reference kernel for bfloat16.
  std::shared_ptr<const Plan> plan_for(int64_t M, bool use_c) const {
    std::pair<std::vector<int64_t>, int> key{{M, use_c ? 1 : 0}, omp_get_max_threads()};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    std::shared_ptr<Plan> p;
    try {
      using dt = memory::data_type;
      const int64_t K = g_.tb ? b_.dim(1) : b_.dim(0), N = g_.tb ? b_.dim(0) : b_.dim(1);
      auto plan = std::make_shared<Plan>();
      plan->user_a = memory::desc({M, K}, dt::f32, g_.ta ? Dims{1, M} : Dims{K, 1});
      plan->a_md = memory::desc({M, K}, dt::bf16, memory::format_tag::ab);
      plan->dst_md = memory::desc({M, N}, dt::f32, memory::format_tag::ab);
      memory::desc user_b({K, N}, dt::f32, g_.tb ? Dims{1, K} : Dims{N, 1});
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops po;
      if (g_.alpha != 1.f) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, g_.alpha, 0.f);
      if (use_c) po.append_sum(g_.beta);
      attr.set_post_ops(po);
      dnnl::matmul::desc d(plan->a_md, memory::desc({K, N}, dt::bf16, memory::format_tag::any), plan->dst_md);
      dnnl::matmul::primitive_desc pd(d, attr, eng_);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) {
        plan->scratch_md = pd.scratchpad_desc();
        plan->prim = dnnl::matmul(pd);
        plan->a_re = Reorder::make(eng_, plan->user_a, plan->a_md);
        // Packed once per layout; every plan (each M, each thread count) finds the same.
        Reorder b_re = Reorder::make(eng_, user_b, pd.weights_desc());
        PackedWeights pw = pack_constant_shared(shared_, "matmul-bf16-b", eng_, user_b, pd.weights_desc(), &b_re, b_);
        plan->packed_b = pw.mem;
        plan->packed_hold = std::move(pw.hold);
        p = std::move(plan);
      }
    } catch (const dnnl::error&) {
      p.reset();
    }
    plans_.emplace(key, p);
    return p;
  }

  bool gemm_;
  GemmAttrs g_;
  Tensor b_;
  dnnl::engine eng_;
  std::shared_ptr<SharedConstants> shared_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<std::vector<int64_t>, int>, std::shared_ptr<const Plan>> plans_;
  CallPool calls_{eng_};
};

// The bf16 kernel for a node the layout pass marked (`_precision` = "bf16") whose B is a
// constant 2-D float32 tensor; null otherwise.
Result<std::unique_ptr<Kernel>> make_bf16_product(const KernelInfo& info, bool gemm, const GemmAttrs& g) {
  BH_ASSIGN_OR_RETURN(bool bf16, bf16_precision(info));
  if (!bf16 || !info.input_is_constant(1)) return std::unique_ptr<Kernel>();
  const Tensor& b = info.constant_inputs[1];
  if (b.dtype() != DataType::kFloat32 || b.rank() != 2 || !b.on_host()) return std::unique_ptr<Kernel>();
  try {
    return std::unique_ptr<Kernel>(std::make_unique<Bf16ProductKernel>(gemm, g, b, dnnl::engine(dnnl::engine::kind::cpu, 0),
                                                                       info.shared));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

// The element types MatMul and Gemm handle (float16/bfloat16 through float32 copies).
Status check_types(const KernelInfo& info, size_t n) {
  for (size_t i = 0; i < n; ++i)
    BH_RETURN_IF_ERROR(check_input_type(info, i, {ew::kFloats | ew::kI32 | ew::kI64 | ew::kU32 | ew::kU64, true}));
  return Status::ok();
}

}  // namespace

void register_dnnl_gemm_kernels(KernelTable& t) {
  t.add("MatMul", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() < 2) return invalid_argument(info.where() + "needs inputs A and B");
    BH_RETURN_IF_ERROR(check_types(info, 2));
    BH_ASSIGN_OR_RETURN(auto bf16, make_bf16_product(info, false, GemmAttrs{}));
    if (bf16) return bf16;
    dnnl_util::warm_sgemm_for(info, false);
    return make_kernel([](KernelContext& ctx) { return matmul_compute(ctx); });
  });
  t.add("Gemm", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() < 2) return invalid_argument(info.where() + "needs inputs A and B");
    BH_RETURN_IF_ERROR(check_types(info, 3));
    GemmAttrs g;
    g.ta = info.node.attr_int("transA", 0) != 0;
    g.tb = info.node.attr_int("transB", 0) != 0;
    g.alpha = info.node.attr_float("alpha", 1.f);
    g.beta = info.node.attr_float("beta", 1.f);
    BH_ASSIGN_OR_RETURN(auto bf16, make_bf16_product(info, true, g));
    if (bf16) return bf16;
    dnnl_util::warm_sgemm_for(info, g.ta);
    return make_kernel([g](KernelContext& ctx) { return gemm_compute(g, ctx); });
  });
}

}  // namespace bulkhead::cpu
