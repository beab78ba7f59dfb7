// MatMul (N-D, batch dimensions broadcast) and Gemm on Vulkan, float32, with one tiled
// shader (shaders/compute_matmul.comp) that reads its operands through strides:
// transposes and broadcast batches cost no copies.
#include <algorithm>
#include <limits>

#include "backends/vulkan/kernels/kernels.h"
#include "backends/vulkan/pipelines.h"
#include "ir/graph.h"

namespace bulkhead::vulkan {
namespace {

constexpr int kMaxBatchRank = 4;
constexpr uint32_t kTile = 64;     // outputs per workgroup along rows and columns
constexpr uint32_t kMaxGroups = 65535;

struct GemmPush {
  uint32_t m, n, k;
  uint32_t a_rs, a_cs, b_rs, b_cs;
  uint32_t c_rs, c_cs, has_c;
  float alpha, beta;
  uint32_t batch0, rank;
  uint32_t dims[kMaxBatchRank], a_bs[kMaxBatchRank], b_bs[kMaxBatchRank];
};
static_assert(sizeof(GemmPush) <= kPushBytes);

bool fits_u32(uint64_t v) { return v <= std::numeric_limits<uint32_t>::max(); }

// One batch dimension of y with the element strides of A and B along it (0: broadcast).
struct BatchDim {
  int64_t size, a_stride, b_stride;
};

// Batch dimensions without size-1 ones, adjacent dimensions merged where both operands
// step through them contiguously; fails when more than the shader's 4 remain.
bool fill_batch(std::vector<BatchDim> dims, GemmPush* push) {
  std::vector<BatchDim> merged;
  for (const BatchDim& d : dims) {
    if (d.size == 1) continue;
    if (!merged.empty()) {
      BatchDim& o = merged.back();
      if (o.a_stride == d.a_stride * d.size && o.b_stride == d.b_stride * d.size) {
        o.size *= d.size;
        o.a_stride = d.a_stride;
        o.b_stride = d.b_stride;
        continue;
      }
    }
    merged.push_back(d);
  }
  if (merged.size() > kMaxBatchRank) return false;
  push->rank = static_cast<uint32_t>(merged.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    push->dims[i] = static_cast<uint32_t>(merged[i].size);
    push->a_bs[i] = static_cast<uint32_t>(merged[i].a_stride);
    push->b_bs[i] = static_cast<uint32_t>(merged[i].b_stride);
  }
  return true;
}

// Records the product in chunks of at most 65535 batches (workgroup z).
Status dispatch_gemm(RunState& rs, const Tensor& a, const Tensor& b, const Tensor* c, const Tensor& y, GemmPush push,
                     uint64_t batches) {
  const uint32_t gx = (push.n + kTile - 1) / kTile, gy = (push.m + kTile - 1) / kTile;
  for (uint64_t b0 = 0; b0 < batches; b0 += kMaxGroups) {
    push.batch0 = static_cast<uint32_t>(b0);
    const uint32_t gz = static_cast<uint32_t>(std::min<uint64_t>(kMaxGroups, batches - b0));
    BH_RETURN_IF_ERROR(rs.dispatch("compute_matmul", {{&a, false}, {&b, false}, {c ? c : &a, false}, {&y, true}},
                                   &push, sizeof push, gx, gy, gz));
  }
  return Status::ok();
}

Status check_sizes(KernelContext& ctx, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t && !fits_u32(static_cast<uint64_t>(t->numel())))
      return unsupported(ctx.where() + "tensor " + t->describe() + " is too large for the Vulkan kernel");
  return Status::ok();
}

Status matmul_compute(KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!a || !b || a->dtype() != DataType::kFloat32 || b->dtype() != DataType::kFloat32)
    return invalid_argument(ctx.where() + "expects two float32 inputs");
  if (a->rank() < 1 || b->rank() < 1)
    return invalid_argument(ctx.where() + "MatMul needs operands of rank >= 1, got " + a->describe() + " and " +
                            b->describe());
  Shape as = a->shape(), bs = b->shape();
  const bool drop_m = as.size() == 1, drop_n = bs.size() == 1;
  if (drop_m) as.insert(as.begin(), 1);
  if (drop_n) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    return invalid_argument(ctx.where() + "inner dimensions differ: A " + a->describe() + ", B " + b->describe());
  const int ra = static_cast<int>(as.size()) - 2, rb = static_cast<int>(bs.size()) - 2;
  const int rank = std::max(ra, rb);
  Shape batch(rank);
  std::vector<BatchDim> dims(rank);
  int64_t sa = M * K, sb = K * N;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t da = d - (rank - ra) >= 0 ? as[d - (rank - ra)] : 1;
    const int64_t db = d - (rank - rb) >= 0 ? bs[d - (rank - rb)] : 1;
    if (da != db && da != 1 && db != 1)
      return invalid_argument(ctx.where() + "batch dimensions of " + a->describe() + " and " + b->describe() +
                              " do not broadcast");
    batch[d] = da == 1 ? db : da;
    dims[d] = {batch[d], da == 1 ? 0 : sa, db == 1 ? 0 : sb};
    sa *= da;
    sb *= db;
  }
  Shape yshape = batch;
  if (!drop_m) yshape.push_back(M);
  if (!drop_n) yshape.push_back(N);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, yshape));
  if (y.numel() == 0) return Status::ok();
  BH_RETURN_IF_ERROR(check_sizes(ctx, {a, b, &y}));
  GemmPush push{};
  push.m = static_cast<uint32_t>(M);
  push.n = static_cast<uint32_t>(N);
  push.k = static_cast<uint32_t>(K);
  push.a_rs = static_cast<uint32_t>(K);
  push.a_cs = 1;
  push.b_rs = static_cast<uint32_t>(N);
  push.b_cs = 1;
  push.alpha = 1.f;
  if (!fill_batch(std::move(dims), &push))
    return unsupported(ctx.where() + "more than 4 independent batch dimensions for the Vulkan MatMul");
  return dispatch_gemm(*rs, *a, *b, nullptr, y, push, static_cast<uint64_t>(shape_numel(batch)));
}

struct GemmAttrs {
  bool ta = false, tb = false;
  float alpha = 1.f, beta = 1.f;
};

// Strides of C broadcast to [M, N] (ONNX Gemm: unidirectional broadcast of C).
Status c_strides(KernelContext& ctx, const Tensor& c, int64_t M, int64_t N, GemmPush* push) {
  int64_t cm = 1, cn = 1;
  if (c.rank() == 2) {
    cm = c.dim(0);
    cn = c.dim(1);
  } else if (c.rank() == 1) {
    cn = c.dim(0);
  } else if (c.rank() != 0) {
    cm = -1;
  }
  if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
    return invalid_argument(ctx.where() + "C " + c.describe() + " cannot be broadcast to [" + std::to_string(M) + "," +
                            std::to_string(N) + "]");
  push->c_rs = cm == 1 ? 0 : static_cast<uint32_t>(cn);
  push->c_cs = cn == 1 ? 0 : 1;
  return Status::ok();
}

Status gemm_compute(const GemmAttrs& g, KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  if (c && !c->defined()) c = nullptr;
  if (!a || !b || a->dtype() != DataType::kFloat32 || b->dtype() != DataType::kFloat32 ||
      (c && c->dtype() != DataType::kFloat32))
    return invalid_argument(ctx.where() + "expects float32 inputs A, B and optional C");
  if (a->rank() != 2 || b->rank() != 2)
    return invalid_argument(ctx.where() + "A and B must be 2-D, got " + a->describe() + " and " + b->describe());
  const int64_t M = g.ta ? a->dim(1) : a->dim(0), K = g.ta ? a->dim(0) : a->dim(1);
  const int64_t N = g.tb ? b->dim(0) : b->dim(1);
  if ((g.tb ? b->dim(1) : b->dim(0)) != K)
    return invalid_argument(ctx.where() + "inner dimensions differ: A " + a->describe() + (g.ta ? " (transposed)" : "") +
                            ", B " + b->describe() + (g.tb ? " (transposed)" : ""));
  GemmPush push{};
  if (c) BH_RETURN_IF_ERROR(c_strides(ctx, *c, M, N, &push));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, Shape{M, N}));
  if (y.numel() == 0) return Status::ok();
  BH_RETURN_IF_ERROR(check_sizes(ctx, {a, b, c, &y}));
  push.m = static_cast<uint32_t>(M);
  push.n = static_cast<uint32_t>(N);
  push.k = static_cast<uint32_t>(K);
  push.a_rs = g.ta ? 1 : static_cast<uint32_t>(K);
  push.a_cs = g.ta ? static_cast<uint32_t>(M) : 1;
  push.b_rs = g.tb ? 1 : static_cast<uint32_t>(N);
  push.b_cs = g.tb ? static_cast<uint32_t>(K) : 1;
  push.has_c = c && g.beta != 0.f;
  push.alpha = g.alpha;
  push.beta = g.beta;
  return dispatch_gemm(*rs, *a, *b, push.has_c ? c : nullptr, y, push, 1);
}

}  // namespace

void add_matmul_kernels(KernelTable& t) {
  t.add("MatMul", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0, 1}));
    return make_kernel([](KernelContext& ctx) { return matmul_compute(ctx); });
  });
  // Gemm before opset 7 has the `broadcast` attribute: left to the CPU.
  t.add("Gemm", 7, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0, 1, 2}));
    const ir::Node& n = info.node;
    GemmAttrs g;
    g.ta = n.attr_int("transA", 0) != 0;
    g.tb = n.attr_int("transB", 0) != 0;
    g.alpha = n.attr_float("alpha", 1.f);
    g.beta = n.attr_float("beta", 1.f);
    return make_kernel([g](KernelContext& ctx) { return gemm_compute(g, ctx); });
  });
}

}  // namespace bulkhead::vulkan
