// MaxPool, AveragePool (1-D and 2-D), GlobalMaxPool and GlobalAveragePool on Vulkan,
// float32 (shaders/compute_pool.comp, shaders/compute_global_pool.comp). MaxPool's
// Indices output and 3-D pooling stay on the CPU.
#include <algorithm>
#include <array>
#include <limits>

#include "backends/vulkan/kernels/kernels.h"
#include "backends/vulkan/pipelines.h"
#include "ir/graph.h"

namespace bulkhead::vulkan {
namespace {

struct PoolAttrs {
  uint32_t kind = 0;  // 0 max, 1 average
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
  bool ceil_mode = false, count_include_pad = false;
};

struct PoolPush {
  uint32_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, peh, pew, dh, dw;
  uint32_t kind, count_include_pad, total;
};
static_assert(sizeof(PoolPush) <= kPushBytes);

// One spatial dimension (lifted so 1-D pools have H = 1).
struct PoolDim {
  int64_t in = 1, k = 1, s = 1, d = 1, pb = 0, pe = 0, out = 1;
};

Status resolve_dim(const PoolAttrs& a, const std::string& where, PoolDim* g) {
  const std::string& ap = a.auto_pad;
  const int64_t dk = (g->k - 1) * g->d + 1;
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    g->out = g->in == 0 ? 0 : (g->in - 1) / g->s + 1;
    const int64_t total = std::max<int64_t>(0, (g->out - 1) * g->s + dk - g->in);
    g->pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    g->pe = total - g->pb;
    return Status::ok();
  }
  if (ap == "VALID") g->pb = g->pe = 0;
  const int64_t span = g->in + g->pb + g->pe - dk;
  if (span < 0) return invalid_argument(where + "the kernel is larger than the padded input");
  if (a.ceil_mode && ap == "NOTSET") {
    g->out = (span + g->s - 1) / g->s + 1;
    if ((g->out - 1) * g->s >= g->in + g->pb) --g->out;
  } else {
    g->out = span / g->s + 1;
  }
  return Status::ok();
}

Result<std::array<PoolDim, 2>> resolve(const PoolAttrs& a, const Tensor& x, const std::string& where) {
  const int nsp = static_cast<int>(a.kernel_shape.size());
  if (x.rank() != nsp + 2)
    return invalid_argument(where + "kernel_shape " + shape_to_string(a.kernel_shape) + " does not match X " +
                            x.describe());
  if ((!a.strides.empty() && a.strides.size() != static_cast<size_t>(nsp)) ||
      (!a.dilations.empty() && a.dilations.size() != static_cast<size_t>(nsp)) ||
      (!a.pads.empty() && a.pads.size() != static_cast<size_t>(2 * nsp)))
    return invalid_argument(where + "strides, dilations or pads do not match kernel_shape");
  std::array<PoolDim, 2> g;
  for (int i = 0; i < nsp; ++i) {
    PoolDim& d = g[i + 2 - nsp];
    d.in = x.dim(2 + i);
    d.k = a.kernel_shape[i];
    d.s = a.strides.empty() ? 1 : a.strides[i];
    d.d = a.dilations.empty() ? 1 : a.dilations[i];
    d.pb = a.pads.empty() ? 0 : a.pads[i];
    d.pe = a.pads.empty() ? 0 : a.pads[i + nsp];
    if (d.k < 1 || d.s < 1 || d.d < 1 || d.pb < 0 || d.pe < 0)
      return invalid_argument(where + "kernel_shape, strides and dilations must be positive and pads non-negative");
    BH_RETURN_IF_ERROR(resolve_dim(a, where, &d));
  }
  return g;
}

Status check_input(KernelContext& ctx, const Tensor* x) {
  if (!x || x->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects a float32 input");
  if (x->rank() < 3) return invalid_argument(ctx.where() + "X " + x->describe() + " needs rank >= 3");
  if (static_cast<uint64_t>(x->numel()) > std::numeric_limits<uint32_t>::max())
    return unsupported(ctx.where() + "X " + x->describe() + " is too large for the Vulkan kernel");
  return Status::ok();
}

Status pool_compute(const PoolAttrs& a, KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  const Tensor* x = ctx.input(0);
  BH_RETURN_IF_ERROR(check_input(ctx, x));
  BH_ASSIGN_OR_RETURN(auto g, resolve(a, *x, ctx.where()));
  Shape yshape{x->dim(0), x->dim(1)};
  for (int j = 2 - static_cast<int>(a.kernel_shape.size()); j < 2; ++j) yshape.push_back(g[j].out);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, yshape));
  if (y.numel() == 0) return Status::ok();
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  PoolPush push{u(g[0].in), u(g[1].in), u(g[0].out), u(g[1].out), u(g[0].k), u(g[1].k),
                u(g[0].s),  u(g[1].s),  u(g[0].pb),  u(g[1].pb),  u(g[0].pe), u(g[1].pe),
                u(g[0].d),  u(g[1].d),  a.kind,      a.count_include_pad ? 1u : 0u, u(y.numel())};
  Groups gr = groups_for(static_cast<uint64_t>(y.numel()));
  return rs->dispatch("compute_pool", {{x, false}, {&y, true}}, &push, sizeof push, gr.x, gr.y);
}

struct GlobalPush {
  uint32_t planes, size, kind;
};

Status global_pool_compute(uint32_t kind, KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  const Tensor* x = ctx.input(0);
  BH_RETURN_IF_ERROR(check_input(ctx, x));
  Shape yshape(x->rank(), 1);
  yshape[0] = x->dim(0);
  yshape[1] = x->dim(1);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, yshape));
  if (y.numel() == 0) return Status::ok();
  const int64_t size = x->numel() / y.numel();
  if (size == 0) return invalid_argument(ctx.where() + "X " + x->describe() + " has empty planes");
  GlobalPush push{static_cast<uint32_t>(y.numel()), static_cast<uint32_t>(size), kind};
  Groups gr = groups_for(static_cast<uint64_t>(y.numel()) * kLocal);
  return rs->dispatch("compute_global_pool", {{x, false}, {&y, true}}, &push, sizeof push, gr.x, gr.y);
}

Result<std::unique_ptr<Kernel>> make_pool(const KernelInfo& info, uint32_t kind) {
  BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0}));
  const ir::Node& n = info.node;
  if (n.outputs.size() > 1 && !n.outputs[1].empty())
    return unsupported(info.where() + "the Vulkan MaxPool has no Indices output");
  PoolAttrs a;
  a.kind = kind;
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.kernel_shape = n.attr_ints("kernel_shape");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  a.pads = n.attr_ints("pads");
  a.ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  a.count_include_pad = n.attr_int("count_include_pad", 0) != 0;
  if (a.kernel_shape.size() != 1 && a.kernel_shape.size() != 2)
    return unsupported(info.where() + "the Vulkan kernel pools over one or two spatial dimensions only");
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" && a.auto_pad != "VALID")
    return unsupported(info.where() + "unknown auto_pad '" + a.auto_pad + "'");
  return make_kernel([a](KernelContext& ctx) { return pool_compute(a, ctx); });
}

}  // namespace

void add_pool_kernels(KernelTable& t) {
  t.add("MaxPool", 1, [](const KernelInfo& info) { return make_pool(info, 0); });
  t.add("AveragePool", 1, [](const KernelInfo& info) { return make_pool(info, 1); });
  for (const auto& e : {std::pair<const char*, uint32_t>{"GlobalMaxPool", 0}, {"GlobalAveragePool", 1}}) {
    const uint32_t kind = e.second;  // a plain variable: clang 14 cannot capture a structured binding
    t.add(e.first, 1, [kind](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0}));
      return make_kernel([kind](KernelContext& ctx) { return global_pool_compute(kind, ctx); });
    });
  }
}

}  // namespace bulkhead::vulkan
