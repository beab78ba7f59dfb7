// MatMul (N-D, batch dimensions broadcast, 1-D operands by numpy's rules) and Gemm,
// float32, with one tiled kernel (kernels/matmul.cl) that reads its operands through
// strides: transposes and broadcast batches cost no copies.
#include <algorithm>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

constexpr int kMaxBatchRank = 4;

Status dispatch_gemm(Call& call, const Tensor& a, const Tensor& b, const Tensor* c, const Tensor& y, const Gemm& p,
                     int64_t batches) {
  const size_t gx = (p.n + OCL_TILE - 1) / OCL_TILE, gy = (p.m + OCL_TILE - 1) / OCL_TILE;
  return call.stream().dispatch("matmul", groups(gx, gy, batches, 16, 16), y.nbytes(), a.buf(), b.buf(),
                                c ? c->buf() : Buf{}, y.buf(), p);
}

Status matmul(Call& call) {
  const Tensor* a = call.input(0);
  const Tensor* b = call.input(1);
  if (!a || !b || a->dtype != BH_TYPE_FLOAT32 || b->dtype != BH_TYPE_FLOAT32)
    return invalid_argument(call.where() + "expects two float32 inputs");
  if (a->rank() < 1 || b->rank() < 1)
    return invalid_argument(call.where() + "MatMul needs operands of rank >= 1, got " + a->describe() + " and " +
                            b->describe());
  Dims as = a->dims, bs = b->dims;
  const bool drop_m = as.size() == 1, drop_n = bs.size() == 1;
  if (drop_m) as.insert(as.begin(), 1);
  if (drop_n) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    return invalid_argument(call.where() + "inner dimensions differ: A " + a->describe() + ", B " + b->describe());
  const int ra = static_cast<int>(as.size()) - 2, rb = static_cast<int>(bs.size()) - 2, rank = std::max(ra, rb);
  Dims batch(rank), sa(rank), sb(rank);
  int64_t stride_a = M * K, stride_b = K * N;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t da = d - (rank - ra) >= 0 ? as[d - (rank - ra)] : 1;
    const int64_t db = d - (rank - rb) >= 0 ? bs[d - (rank - rb)] : 1;
    if (da != db && da != 1 && db != 1)
      return invalid_argument(call.where() + "batch dimensions of " + a->describe() + " and " + b->describe() +
                              " do not broadcast");
    batch[d] = da == 1 ? db : da;
    sa[d] = da == 1 ? 0 : stride_a;
    sb[d] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  Dims ydims = batch;
  if (!drop_m) ydims.push_back(M);
  if (!drop_n) ydims.push_back(N);
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, ydims));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({a, b, &y}));
  const int64_t batches = numel(batch);
  simplify(batch, {&sa, &sb});
  if (batch.size() > kMaxBatchRank)
    return unsupported(call.where() + "more than 4 independent batch dimensions for the OpenCL MatMul");
  Gemm p{};
  p.m = static_cast<int>(M);
  p.n = static_cast<int>(N);
  p.k = static_cast<int>(K);
  p.a_rs = static_cast<int>(K);
  p.a_cs = 1;
  p.b_rs = static_cast<int>(N);
  p.b_cs = 1;
  p.alpha = 1.f;
  p.rank = static_cast<int>(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) {
    p.dims[d] = static_cast<int>(batch[d]);
    p.a_bs[d] = static_cast<int>(sa[d]);
    p.b_bs[d] = static_cast<int>(sb[d]);
  }
  return dispatch_gemm(call, *a, *b, nullptr, y, p, batches);
}

struct GemmAttrs {
  bool ta = false, tb = false;
  float alpha = 1.f, beta = 1.f;
};

Status gemm(const GemmAttrs& g, Call& call) {
  const Tensor* a = call.input(0);
  const Tensor* b = call.input(1);
  const Tensor* c = call.input(2);
  if (!a || !b || a->dtype != BH_TYPE_FLOAT32 || b->dtype != BH_TYPE_FLOAT32 || (c && c->dtype != BH_TYPE_FLOAT32))
    return invalid_argument(call.where() + "expects float32 inputs A, B and optional C");
  if (a->rank() != 2 || b->rank() != 2)
    return invalid_argument(call.where() + "A and B must be 2-D, got " + a->describe() + " and " + b->describe());
  const int64_t M = g.ta ? a->dims[1] : a->dims[0], K = g.ta ? a->dims[0] : a->dims[1];
  const int64_t N = g.tb ? b->dims[0] : b->dims[1];
  if ((g.tb ? b->dims[1] : b->dims[0]) != K)
    return invalid_argument(call.where() + "inner dimensions differ: A " + a->describe() +
                            (g.ta ? " (transposed)" : "") + ", B " + b->describe() + (g.tb ? " (transposed)" : ""));
  Gemm p{};
  if (c) {
    // C broadcasts to [M, N] (unidirectionally).
    int64_t cm = 1, cn = 1;
    if (c->rank() == 2) {
      cm = c->dims[0];
      cn = c->dims[1];
    } else if (c->rank() == 1) {
      cn = c->dims[0];
    } else if (c->rank() != 0) {
      cm = -1;
    }
    if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
      return invalid_argument(call.where() + "C " + c->describe() + " cannot be broadcast to [" + std::to_string(M) +
                              "," + std::to_string(N) + "]");
    p.c_rs = cm == 1 ? 0 : static_cast<int>(cn);
    p.c_cs = cn == 1 ? 0 : 1;
  }
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, Dims{M, N}));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({a, b, c, &y}));
  p.m = static_cast<int>(M);
  p.n = static_cast<int>(N);
  p.k = static_cast<int>(K);
  p.a_rs = g.ta ? 1 : static_cast<int>(K);
  p.a_cs = g.ta ? static_cast<int>(M) : 1;
  p.b_rs = g.tb ? 1 : static_cast<int>(N);
  p.b_cs = g.tb ? static_cast<int>(K) : 1;
  p.has_c = c && g.beta != 0.f;
  p.alpha = g.alpha;
  p.beta = g.beta;
  return dispatch_gemm(call, *a, *b, p.has_c ? c : nullptr, y, p, 1);
}

}  // namespace

Result<OpPtr> make_matmul(const Node& n) {
  OCL_TRY(n.require_types(kFloat, {0, 1}));
  return make_op([](Call& call) { return matmul(call); });
}

Result<OpPtr> make_gemm(const Node& n) {
  OCL_TRY(n.require_types(kFloat, {0, 1, 2}));
  GemmAttrs g;
  g.ta = n.attr_int("transA", 0) != 0;
  g.tb = n.attr_int("transB", 0) != 0;
  g.alpha = n.attr_float("alpha", 1.f);
  g.beta = n.attr_float("beta", 1.f);
  return make_op([g](Call& call) { return gemm(g, call); });
}

}  // namespace bulkhead::opencl
