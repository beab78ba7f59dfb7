// MaxPool and AveragePool over one or two spatial dimensions, GlobalMaxPool and
// GlobalAveragePool, float32 (kernels/pool.cl). MaxPool's Indices output and 3-D pooling
// stay on the CPU.
#include <algorithm>
#include <array>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

struct PoolAttrs {
  int kind = 0;  // 0 max, 1 average
  std::string auto_pad = "NOTSET";
  Dims kernel_shape, strides, dilations, pads;
  bool ceil_mode = false, count_include_pad = false;
};

// One spatial dimension (lifted so that 1-D pools have H = 1).
struct PoolDim {
  int64_t in = 1, k = 1, s = 1, d = 1, pb = 0, pe = 0, out = 1;
};

Status resolve_dim(const PoolAttrs& a, const std::string& where, PoolDim* g) {
  const int64_t dk = (g->k - 1) * g->d + 1;
  if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    g->out = g->in == 0 ? 0 : (g->in - 1) / g->s + 1;
    const int64_t total = std::max<int64_t>(0, (g->out - 1) * g->s + dk - g->in);
    g->pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    g->pe = total - g->pb;
    return Status::ok();
  }
  if (a.auto_pad == "VALID") g->pb = g->pe = 0;
  const int64_t span = g->in + g->pb + g->pe - dk;
  if (span < 0) return invalid_argument(where + "the kernel is larger than the padded input");
  if (a.ceil_mode && a.auto_pad == "NOTSET") {
    g->out = (span + g->s - 1) / g->s + 1;
    if ((g->out - 1) * g->s >= g->in + g->pb) --g->out;  // a last window that would start in the end padding
  } else {
    g->out = span / g->s + 1;
  }
  return Status::ok();
}

Result<std::array<PoolDim, 2>> resolve(const PoolAttrs& a, const Tensor& x, const std::string& where) {
  const size_t nsp = a.kernel_shape.size();
  if (x.rank() != static_cast<int>(nsp) + 2)
    return invalid_argument(where + "kernel_shape " + dims_text(a.kernel_shape) + " does not match X " + x.describe());
  if ((!a.strides.empty() && a.strides.size() != nsp) || (!a.dilations.empty() && a.dilations.size() != nsp) ||
      (!a.pads.empty() && a.pads.size() != 2 * nsp))
    return invalid_argument(where + "strides, dilations or pads do not match kernel_shape");
  std::array<PoolDim, 2> g;
  for (size_t i = 0; i < nsp; ++i) {
    PoolDim& d = g[i + 2 - nsp];
    d.in = x.dims[2 + i];
    d.k = a.kernel_shape[i];
    d.s = a.strides.empty() ? 1 : a.strides[i];
    d.d = a.dilations.empty() ? 1 : a.dilations[i];
    d.pb = a.pads.empty() ? 0 : a.pads[i];
    d.pe = a.pads.empty() ? 0 : a.pads[i + nsp];
    if (d.k < 1 || d.s < 1 || d.d < 1 || d.pb < 0 || d.pe < 0 || d.k > (1 << 20) || d.s > (1 << 20) ||
        d.d > (1 << 20) || d.pb > (1 << 20) || d.pe > (1 << 20))
      return invalid_argument(where + "kernel_shape, strides and dilations must be positive and pads non-negative");
    OCL_TRY(resolve_dim(a, where, &d));
  }
  return g;
}

Status check_input(Call& call, const Tensor* x) {
  if (!x || x->dtype != BH_TYPE_FLOAT32) return invalid_argument(call.where() + "expects a float32 input");
  if (x->rank() < 3) return invalid_argument(call.where() + "X " + x->describe() + " needs rank >= 3");
  return call.check_size({x});
}

Status pool(const PoolAttrs& a, Call& call) {
  const Tensor* x = call.input(0);
  OCL_TRY(check_input(call, x));
  OCL_ASSIGN(auto g, resolve(a, *x, call.where()));
  Dims ydims{x->dims[0], x->dims[1]};
  for (int j = 2 - static_cast<int>(a.kernel_shape.size()); j < 2; ++j) ydims.push_back(g[j].out);
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, ydims));
  OCL_TRY(call.check_size({&y}));
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const Pool p{i(g[0].in), i(g[1].in), i(g[0].out), i(g[1].out), i(g[0].k), i(g[1].k), i(g[0].s), i(g[1].s),
               i(g[0].pb), i(g[1].pb), i(g[0].pe),  i(g[1].pe),  i(g[0].d), i(g[1].d), a.kind,    a.count_include_pad};
  return call.stream().dispatch("pool", items(y.numel()), y.nbytes(), x->buf(), y.buf(), p);
}

Status global_pool(int kind, Call& call) {
  const Tensor* x = call.input(0);
  OCL_TRY(check_input(call, x));
  Dims ydims(x->rank(), 1);
  ydims[0] = x->dims[0];
  ydims[1] = x->dims[1];
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, ydims));
  if (y.numel() == 0) return Status::ok();
  const int size = static_cast<int>(x->numel() / y.numel());
  if (size == 0) return invalid_argument(call.where() + "X " + x->describe() + " has empty planes");
  return call.stream().dispatch("global_pool", groups(y.numel(), 1, 1, OCL_GROUP, 1), y.nbytes(), x->buf(), y.buf(),
                                size, kind);
}

}  // namespace

Result<OpPtr> make_pool(const Node& n, int kind) {
  OCL_TRY(n.require_types(kFloat, {0}));
  OCL_TRY(n.require_one_output("MaxPool's Indices"));
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
    return unsupported(n.where() + "the OpenCL kernel pools over one or two spatial dimensions only");
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" && a.auto_pad != "VALID")
    return invalid_argument(n.where() + "unknown auto_pad '" + a.auto_pad + "'");
  return make_op([a](Call& call) { return pool(a, call); });
}

Result<OpPtr> make_global_pool(const Node& n, int kind) {
  OCL_TRY(n.require_types(kFloat, {0}));
  return make_op([kind](Call& call) { return global_pool(kind, call); });
}

}  // namespace bulkhead::opencl
